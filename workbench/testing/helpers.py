"""Helpers for testing strategies (ours and plugins'): a probe that records steps, one-trial plans and
requests, a session loaded through the spec parser and the registry, a tiny random-weight llama
built in milliseconds, and small database and network helpers. Heavy imports (torch, transformers)
happen inside the functions that need them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TINY_FAMILIES",
    "TINY_SLIDING_WINDOW",
    "ListProbe",
    "build_tiny_model",
    "closed_port_url",
    "db_rows",
    "load_session",
    "request_for",
    "text_section",
    "tiny_prompt",
    "trial_plan",
]


def text_section(text: str, title: str) -> str:
    """The block of a printed report (``workbench show``/``run``) that starts with the line beginning
    with ``title``, up to the next blank line ("" when there is none)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(title):
            end = next((j for j in range(i + 1, len(lines)) if not lines[j].strip()), len(lines))
            return "\n".join(lines[i:end])
    return ""


def db_rows(db, sql: str, params=()) -> list[dict]:
    """The rows of a query on a results database, as dicts."""
    import sqlite3

    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


class ListProbe:
    """A probe that keeps each step's token ids and keyword info; raises ``Cancelled`` after
    ``cancel_after`` steps when given."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.steps: list[list[int]] = []
        self.info: list[dict] = []
        self.marks: list[str] = []  # probe.mark's phases, in order
        self.cancel_after = cancel_after

    def step(self, token_ids, **kw) -> None:
        from workbench.core.strategy import Cancelled

        self.steps.append(list(token_ids))
        self.info.append(kw)
        if self.cancel_after is not None and len(self.steps) >= self.cancel_after:
            raise Cancelled

    def mark(self, phase) -> None:
        self.marks.append(phase)

    @property
    def tokens(self) -> list[int]:
        return [t for s in self.steps for t in s]


def request_for(session, text, **kw):
    """A request for a raw-text prompt, tokenized by ``session``."""
    from workbench.core.strategy import Prompt, Request

    prompt = Prompt(id="p", prompt=text)
    return Request(prompt=prompt, input_ids=tuple(session.encode(prompt)), **kw)


#: The model families :func:`build_tiny_model` builds (transformers config class, model class, and
#: what differs from the defaults): the common families people load, each with what makes it differ
#: (Gemma 3's and Mistral's sliding-window layers, Qwen3's and OLMo 2's norms on queries and keys,
#: Phi-3's fused projections, GPT-2's Conv1D layers and learned positions, Granite's multipliers).
TINY_FAMILIES = ("llama", "qwen2", "qwen3", "gemma3", "phi3", "mistral", "gpt2", "granite", "olmo2")

#: The sliding window of the tiny Gemma 3 and Mistral models: shorter than the tests' prompts, so
#: their sliding-window layers drop positions (what a KV-cache reuse must get right).
TINY_SLIDING_WINDOW = 8


def _tiny_config(family: str, vocab_size: int, hidden_size: int) -> Any:
    import transformers

    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        # a byte-level tokenizer makes 4 tokens of a word
        max_position_embeddings=1024 if family == "qwen2" else 256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    if family == "llama":
        return transformers.LlamaConfig(**common)
    if family == "qwen2":
        return transformers.Qwen2Config(**common)
    if family == "qwen3":
        return transformers.Qwen3Config(**common, head_dim=hidden_size // 4)
    if family == "gemma3":
        return transformers.Gemma3TextConfig(
            **common,
            head_dim=hidden_size // 4,
            sliding_window=TINY_SLIDING_WINDOW,
            layer_types=["sliding_attention", "full_attention"],
        )
    if family == "phi3":
        return transformers.Phi3Config(**common)
    if family == "mistral":
        return transformers.MistralConfig(**common, sliding_window=TINY_SLIDING_WINDOW)
    if family == "granite":
        return transformers.GraniteConfig(**common)
    if family == "olmo2":
        return transformers.Olmo2Config(**common)
    if family == "gpt2":
        return transformers.GPT2Config(
            vocab_size=vocab_size,
            n_embd=hidden_size,
            n_layer=2,
            n_head=4,
            n_positions=256,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=2,
        )
    raise ValueError(f"unknown tiny model family {family!r}; one of {', '.join(TINY_FAMILIES)}")


def _byte_level_tokenizer(specials: list[str]):
    """A Qwen2 tokenizer over single bytes (and one merge, ``" w"``): transformers maps the ``qwen2``
    model type to this class whatever the folder's tokenizer says."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    pieces = specials + list(bytes_to_unicode().values()) + ["\u0120w"]
    vocab = {tok: i for i, tok in enumerate(pieces)}
    merges: Any = [("\u0120", "w")]  # pairs; the stubs say strings
    return Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
    )


def build_tiny_model(folder, *, hidden_size: int = 32, family: str = "llama", seed: int = 0):
    """A random-weight model with a word-level tokenizer and a chat template: built in milliseconds.
    4 attention heads and 2 KV heads of ``hidden_size / 4`` (runtimes with fused attention kernels,
    ONNX Runtime's, want heads of 16 or more: ``hidden_size=64``). ``family``: one of
    :data:`TINY_FAMILIES` (a llama by default); ``seed``: the random weights' (another seed makes a
    draft that disagrees with the target)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(200)] + [
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
        "is",
        "it",
        "you",
        "that",
        "he",
        "was",
        "for",
        "on",
        "are",
        "with",
        "as",
    ]
    specials = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"]
    if family == "qwen2":  # transformers loads every qwen2 folder's tokenizer as a byte-level BPE
        tokenizer = _byte_level_tokenizer(specials)
        vocab = tokenizer.get_vocab()
    else:
        vocab = {tok: i for i, tok in enumerate(specials + words)}
        backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
        )
    tokenizer.chat_template = (
        "{% for m in messages %}{{ '<|' + m['role'] + '|> ' + m['content'] + ' ' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|> ' }}{% endif %}"
    )
    config = _tiny_config(family, len(vocab), hidden_size)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_prompt(n_words: int = 12, start: int = 0) -> str:
    return " ".join(f"w{(start + 7 * i) % 200}" for i in range(n_words))


def trial_plan(prompt="a b c d e f g h", max_new_tokens: int = 10, **overrides):
    """A one-trial plan for running a session through the real TrialRunner (greedy by default)."""
    from workbench.core.strategy import Prompt
    from workbench.run.plan import TrialPlan

    if isinstance(prompt, str):
        prompt = Prompt(id="p1", prompt=prompt)
    fields = dict(
        workload="w",
        prompt=prompt,
        repetition=0,
        warmup=False,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        top_p=1.0,
        top_k=0,
        seed=1,
        ignore_eos=False,
        stop=(),
    )
    return TrialPlan(**{**fields, **overrides})


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (the port was bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def load_session(model_dir, strategy, device="cpu", dtype="float32", **params):
    """A loaded session of ``strategy`` on a model folder, through the spec parser and the registry
    (parameters as spec keys; strings, numbers and booleans)."""
    from workbench.core import registry
    from workbench.core.device import Device
    from workbench.spec.parse import parse_spec

    def toml(value):
        return ("true" if value else "false") if isinstance(value, bool) else repr(value).replace("'", '"')

    extra = "".join(f"{k} = {toml(v)}\n" for k, v in params.items())
    spec = parse_spec(
        f'[[variants]]\nname = "v"\nmodel = "{model_dir}"\nstrategy = "{strategy}"\ndtype = "{dtype}"\n'
        f'{extra}[[workloads]]\nname = "code"\n'
    )
    v = spec.variants[0]
    kind, _, index = device.partition(":")
    return registry.get(v.strategy_ref)().load(v, Device(kind, int(index) if index else None))
