from __future__ import annotations

import os

import pytest

# Never let a test write into the user's real results database or model cache by accident.
os.environ.pop("WORKBENCH_DB", None)
# A known memory bandwidth for runs made by tests (roofline figures with known answers; no 0.2 s
# measurement per worker, nothing written to the user's cache). tests/test_roofline.py measures.
os.environ["WORKBENCH_BANDWIDTH_GBS"] = "20"
# Qt tests run headless (CI has no display); a developer can override it to watch a real window.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_addoption(parser):
    parser.addoption(
        "--vllm",
        action="store_true",
        help="run the tests that start a real vLLM server (venv from scripts/vllm_venv.sh; see docs/ci.md)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--vllm"):
        return
    skip = pytest.mark.skip(reason="starts a real vLLM server: run with --vllm (see docs/ci.md)")
    for item in items:
        if "vllm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "results.db"


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
        self.cancel_after = cancel_after

    def step(self, token_ids, **kw) -> None:
        from workbench.core.strategy import Cancelled

        self.steps.append(list(token_ids))
        self.info.append(kw)
        if self.cancel_after is not None and len(self.steps) >= self.cancel_after:
            raise Cancelled

    @property
    def tokens(self) -> list[int]:
        return [t for s in self.steps for t in s]


def request_for(session, text, **kw):
    """A request for a raw-text prompt, tokenized by ``session``."""
    from workbench.core.strategy import Prompt, Request

    prompt = Prompt(id="p", prompt=text)
    return Request(prompt=prompt, input_ids=tuple(session.encode(prompt)), **kw)


@pytest.fixture(scope="module")
def one_thread():
    """The tiny models are latency-bound: on a busy machine extra intra-op threads only spin (a
    prefill of 55 tokens measured 3 ms on 1 thread vs 260 ms on 2 contended ones). Use it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def float32_mb(tiny_model_dir):
    """The tiny model's float32 weight footprint, as the baseline reports it."""
    session = load_session(tiny_model_dir, "baseline")
    mb = session.weights_mb
    session.close()
    return mb


def _build_tiny_model(folder):
    """A random-weight llama with a word-level tokenizer and a chat template: built in milliseconds."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

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
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    pytest.importorskip("torch")
    return _build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


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


#: A run with known costs: a baseline, a "quantized-like" variant (faster decode, slower prefill) and a
#: "speculative-like" one (3 tokens per step), on prompts of different lengths and both sweeps. Costs
#: are large enough (ms) to stay distinguishable on a loaded CI machine: the fake keeps an absolute
#: schedule, so a late prefill shortens the decode that follows, but totals and slopes hold.
FAKE_LEVERS_SPEC = """
name = "fake levers"
repetitions = 2
warmup = 1

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 1
prefill_ms_per_token = 0.2
decode_ms_per_token = 1.0
weights_mb = 5

[[variants]]
name = "int8"
strategy = "fake"
prefill_ms = 1
prefill_ms_per_token = 0.3
decode_ms_per_token = 0.6
weights_mb = 2.5

[[variants]]
name = "spec"
strategy = "fake"
prefill_ms = 1.5
prefill_ms_per_token = 0.2
decode_ms_per_token = 0.5
tokens_per_step = 3
weights_mb = 6

[[workloads]]
name = "rag"
limit = 2
max_new_tokens = 4

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 32

[[workloads]]
name = "sweep-input"
limit = 3
max_new_tokens = 8

[[workloads]]
name = "sweep-output"
limit = 3
"""


@pytest.fixture(scope="session")
def fake_run_db(tmp_path_factory):
    """A real results DB holding one finished run of FAKE_LEVERS_SPEC (run id 1)."""
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    path = tmp_path_factory.mktemp("fake-run") / "results.db"
    with Store(path) as store:
        result = RunExecutor(parse_spec(FAKE_LEVERS_SPEC), store).run()
    assert result.status == "ok", result.errors
    return path


@pytest.fixture
def openai_server():
    """A real local OpenAI-compatible streaming server (stdlib, in a thread) with known costs."""
    from workbench.testing.fake_server import FakeOpenAIServer

    with FakeOpenAIServer(prefill_ms=20, decode_ms_per_token=4) as server:
        yield server


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
