"""``prompt-compression``: a prefill lever, lossy. A compressor model scores the prompt's tokens and the
least informative are dropped before the target's prefill.

In the manner of Selective Context and LLMLingua (implemented here, without their package): a small
causal model reads the prompt and gives every token its *surprisal*, ``-log p(token | the tokens
before it)``; a token the compressor could predict carries little information, so the least surprising
ones are dropped until the prompt is down to ``rate`` of its tokens (or to ``target_tokens``), counted
in the **target's** tokens.

- **What is kept.** The chat template's tokens and the system prompt are never dropped; earlier
  turns of a chat may all be. The message body (a raw prompt, or the last user message) is read as
  *instruction, context, question* (:func:`body_parts`): where the workload line names them
  (``instruction`` / ``context`` / ``question``, as LLMLingua's ``compress_prompt`` takes them), only
  the context may be dropped; otherwise the instruction is the first paragraph when short (at most
  :data:`SHORT_CHARS` characters, and more follow), else the first sentence when short; the question
  is the last paragraph when short, else its last sentence when short; everything between — the
  document to summarise, the passages before a question — is the context. So "an instruction, then
  the document" in one message compresses the document. When the kept parts alone exceed the
  budget, the achieved ratio stays above the requested one, and the trial records how many tokens
  each kept part held (``compress_protected``): the report names the part.
- **Granularity.** ``token``: single tokens, the least surprising first. ``sentence``: whole
  sentences (a regex splitter on ``. ! ?`` and line breaks, no language data needed), the lowest mean
  surprisal first.
- **The compressor.** ``compressor = ""``: the target itself; any model source: a smaller model (its
  own tokenizer: its surprisal is spread over the characters of its tokens, and a target token gets
  the sum over its characters); ``compressor_layers = N``: only the compressor's first N layers (a
  copy of the model with N layers, loaded beside the target: cheap surprisal from a truncated model).
  It reads the prompt ``segment_tokens`` at a time through its KV cache.
- **Timing.** Compression is inside the timed TTFT (the prompt is compressed after the clock
  started): TTFT = compression + prefill of the compressed prompt. The strategy marks the end of the
  compression through the probe (``probe.mark("compress")``); the runner reads its clock there and
  records ``compress_ms``. ``trimmed_tokens`` is what was dropped; ``compress_rate`` the requested
  share of the prompt kept (the achieved one is ``1 - trimmed_tokens / input_tokens``).
- **Quality.** The quality pass scores the baseline's answer under the compressed prompt
  (:meth:`sent_prompt`): how much the answer's distribution moved because the context was cut.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from workbench.strategy import Output, Probe, Prompt, Request, Session, Strategy, field_help, model_field

from .hf_session import HFSession, decode_loop, torch_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = [
    "SHORT_CHARS",
    "Part",
    "PromptCompressionConfig",
    "PromptCompressionStrategy",
    "body_parts",
    "choose_kept",
    "compressible_spans",
    "prompt_parts",
    "sentence_units",
]


@dataclass
class PromptCompressionConfig:
    rate: float = field_help(
        "share of the prompt's tokens (the target's) to keep; the system prompt, the template and the "
        "question are always kept",
        default=0.5,
    )
    target_tokens: int = field_help(
        "a token budget for the compressed prompt instead of rate (0 = use rate)", default=0
    )
    granularity: Literal["token", "sentence"] = field_help(
        "token = drop single tokens, the least surprising first; sentence = drop whole sentences, the "
        "lowest mean surprisal first",
        default="token",
    )
    compressor: str = model_field(
        "the model that scores the prompt (demo:..., a Hugging Face id, a folder); empty = the target itself",
        default="",
    )
    compressor_layers: int = field_help(
        "score with only the compressor's first N layers (0 = all of them)", default=0
    )
    segment_tokens: int = field_help(
        "the compressor reads the prompt this many tokens at a time, through its KV cache", default=256
    )

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1], got {self.rate}")
        if self.target_tokens < 0:
            raise ValueError(f"target_tokens must be 0 or more, got {self.target_tokens}")
        if self.compressor_layers < 0:
            raise ValueError(f"compressor_layers must be 0 or more, got {self.compressor_layers}")
        if self.segment_tokens < 8:
            raise ValueError(f"segment_tokens must be at least 8, got {self.segment_tokens}")


#: a paragraph or sentence of at most this many characters counts as short: kept whole as the
#: instruction (at the start of a message) or the question (at its end); a longer one is document
SHORT_CHARS = 300


@dataclass(frozen=True)
class Part:
    """A character span of the prompt text and whether compression may drop its tokens. Names:
    ``system``, ``instruction``, ``question`` (kept), ``context``, ``earlier turns`` (droppable); the
    characters in no part are the chat template's (kept)."""

    name: str
    start: int
    end: int
    droppable: bool


_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """Character spans of the paragraphs of ``text`` (separated by blank lines)."""
    spans, start = [], 0
    for m in _PARAGRAPH.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _short(span: tuple[int, int]) -> bool:
    return span[1] - span[0] <= SHORT_CHARS


def body_parts(
    text: str, start: int, end: int, fields: tuple[tuple[str, str], ...] | None = None
) -> list[Part]:
    """The parts of one message body, ``text[start:end]`` (a raw prompt, or the last user message).

    ``fields``: the workload line named them (``instruction`` / ``context`` / ``question``, joined by
    blank lines): the context may be dropped, the rest is kept. Otherwise by layout: the
    **instruction** is the first paragraph when it is short (at most :data:`SHORT_CHARS` characters)
    and more follow, else the first sentence when short; the **question** is the last paragraph when
    short, else its last sentence when short; what lies between is the **context** (the document,
    the passages). A body that is short as a whole is all question."""
    body = text[start:end]
    if fields is not None and "\n\n".join(t for _, t in fields if t) == body:
        parts, at = [], start
        for name, value in fields:
            if value:
                parts.append(Part(name, at, at + len(value), name == "context"))
                at += len(value) + 2
        return parts
    paragraphs = [(start + a, start + b) for a, b in _paragraphs(body)]
    if not paragraphs:
        return []
    first, last = paragraphs[0], paragraphs[-1]
    if _short((first[0], last[1])):
        return [Part("question", first[0], last[1], False)]
    head: tuple[int, int] | None = first
    if len(paragraphs) == 1 or not _short(first):
        head = next(iter(sentence_units(text, [first])), None)
    if head is not None and not _short(head):
        head = None
    tail: tuple[int, int] | None = last
    if len(paragraphs) == 1 or not _short(last):
        tail = next(reversed(sentence_units(text, [last])), None)
    if tail is not None and (not _short(tail) or (head is not None and tail[0] < head[1])):
        tail = None
    a = head[1] if head is not None else first[0]
    b = tail[0] if tail is not None else last[1]
    parts = []
    if head is not None:
        parts.append(Part("instruction", *head, False))
    if b > a:
        parts.append(Part("context", a, b, True))
    if tail is not None:
        parts.append(Part("question", *tail, False))
    return parts


def prompt_parts(prompt: Prompt, text: str) -> list[Part]:
    """The parts of ``text`` (the prompt as the target's tokenizer reads it: raw, or through the chat
    template): a raw prompt is one body (:func:`body_parts`); in a chat the system prompt is kept,
    the last user message is a body, and every other message is droppable (``earlier turns``)."""
    if prompt.messages is None:
        return body_parts(text, 0, len(text), prompt.parts)
    messages = list(prompt.messages)
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    parts: list[Part] = []
    cursor = 0
    for i, message in enumerate(messages):
        content = str(message.get("content", ""))
        found = text.find(content, cursor) if content else -1
        if found < 0:
            continue
        cursor = found + len(content)
        if message.get("role") == "system":
            parts.append(Part("system", found, cursor, False))
        elif i == last_user:
            parts.extend(body_parts(text, found, cursor, prompt.parts))
        else:
            parts.append(Part("earlier turns", found, cursor, True))
    return parts


def compressible_spans(prompt: Prompt, text: str) -> list[tuple[int, int]]:
    """The character spans of ``text`` whose tokens may be dropped (:func:`prompt_parts`)."""
    return [(p.start, p.end) for p in prompt_parts(prompt, text) if p.droppable]


def sentence_units(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The sentences inside ``spans``: split after ``. ! ?`` followed by white space, and at line breaks."""
    units = []
    for a, b in spans:
        start = a
        for m in _SENTENCE_END.finditer(text, a, b):
            if m.start() > start:
                units.append((start, m.start()))
            start = m.end()
        if b > start:
            units.append((start, b))
    return units


def choose_kept(
    scores: list[float],
    droppable: list[bool],
    budget: int,
    units: list[list[int]] | None = None,
) -> list[int]:
    """The indices of the tokens kept (in order): the droppable ones with the lowest scores go first
    until at most ``budget`` remain (or nothing droppable is left). ``units``: groups of token indices
    dropped together (sentences), ranked by their mean score; ``None``: tokens one by one."""
    n = len(scores)
    excess = n - budget
    dropped: set[int] = set()
    if excess > 0:
        groups = units if units is not None else [[i] for i in range(n) if droppable[i]]
        groups = [g for g in groups if g and all(droppable[i] for i in g)]
        ranked = sorted(groups, key=lambda g: (sum(scores[i] for i in g) / len(g), g[0]))
        for group in ranked:
            if len(dropped) >= excess:
                break
            dropped.update(group)
    return [i for i in range(n) if i not in dropped]


def _owner(parts: list[Part], a: int, b: int) -> Part | None:
    """The part a token of characters ``a..b`` belongs to: the droppable part holding it whole, else
    the kept part it overlaps most; None: the chat template's (and special tokens, ``a == b``)."""
    if b <= a:
        return None
    best, overlap = None, 0
    for p in parts:
        if p.droppable:
            if p.start <= a and b <= p.end:
                return p
            continue
        o = min(b, p.end) - max(a, p.start)
        if o > overlap:
            best, overlap = p, o
    return best


class _Compressor:
    """Surprisal of a text's characters under a causal model, read ``segment`` tokens at a time."""

    def __init__(self, hf: Any, segment: int) -> None:
        self.hf = hf
        self.segment = segment

    def token_surprisal(self, ids: list[int]) -> list[float]:
        """``-log p(ids[i] | ids[:i])`` per token (the first: infinite, never the least informative)."""
        import torch

        from ._hf import kv_cache
        from ._kv import new_cache

        model = self.hf.model
        out = [math.inf]
        with torch.inference_mode():
            cache = new_cache(model)
            previous = None  # the last logits of the previous segment: they predict this one's first token
            for start in range(0, len(ids), self.segment):
                chunk = ids[start : start + self.segment]
                x = torch.tensor([chunk], dtype=torch.long, device=self.hf.torch_device)
                logits = model(input_ids=x, **kv_cache(cache), use_cache=True).logits[0].float()
                logp = torch.log_softmax(logits, dim=-1)
                target = torch.tensor(chunk, device=logp.device)
                if previous is not None:
                    out.append(float(-previous[chunk[0]]))
                if len(chunk) > 1:
                    out.extend((-logp[:-1].gather(-1, target[1:, None]).squeeze(-1)).tolist())
                previous = logp[-1]
        return out[: len(ids)]

    def char_surprisal(self, text: str) -> list[float]:
        """The text read by this compressor's own tokenizer: each token's surprisal spread evenly over
        its characters (a character no token covers: 0)."""
        enc = self.hf.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
        bos = self.hf.tokenizer.bos_token_id
        prefix = [bos] if bos is not None else []
        surprisal = self.token_surprisal(prefix + ids)[len(prefix) :]
        chars = [0.0] * len(text)
        for (a, b), s in zip(offsets, surprisal, strict=True):
            if b > a and math.isfinite(s):
                for c in range(a, b):
                    chars[c] = s / (b - a)
        return chars


class PromptCompressionSession(HFSession):
    def __init__(
        self, hf: Any, config: PromptCompressionConfig, compressor: Any, same_tokenizer: bool
    ) -> None:
        super().__init__(hf)
        self.config = config
        self.compressor = _Compressor(compressor, config.segment_tokens)
        self.same_tokenizer = same_tokenizer

    def _budget(self, n: int) -> int:
        c = self.config
        return c.target_tokens if c.target_tokens > 0 else max(1, math.ceil(c.rate * n))

    def _text(self, prompt: Prompt) -> str:
        tokenizer = self.hf.tokenizer
        if prompt.messages is not None:
            return str(
                tokenizer.apply_chat_template(
                    list(prompt.messages), add_generation_prompt=True, tokenize=False
                )
            )
        return prompt.prompt or ""

    def compress(self, request: Request) -> list[int]:
        """The prompt's ids as sent to the target: within the budget where the droppable parts allow."""
        return self.compressed(request)[0]

    def compressed(self, request: Request) -> tuple[list[int], dict[str, int] | None]:
        """The ids sent, and the tokens that could not be dropped per part (:class:`Part`'s names,
        ``template`` for the chat template's and special tokens, ``whole prompt`` when the text does
        not tokenize back to the prompt's ids); None when the prompt was within the budget."""
        ids = list(request.input_ids)
        budget = self._budget(len(ids))
        if len(ids) <= budget:
            return ids, None
        prompt = request.prompt
        text = self._text(prompt)
        enc = self.hf.tokenizer(text, add_special_tokens=prompt.messages is None, return_offsets_mapping=True)
        full, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
        if full[: len(ids)] != ids:  # a prompt this tokenizer does not read back the same way: as is
            return ids, {"whole prompt": len(ids)}
        offsets = offsets[: len(ids)]
        parts = prompt_parts(prompt, text)
        owner = [_owner(parts, a, b) for a, b in offsets]
        droppable = [p is not None and p.droppable for p in owner]
        protected: dict[str, int] = {}
        for p in owner:
            if p is None or not p.droppable:
                name = p.name if p is not None else "template"
                protected[name] = protected.get(name, 0) + 1
        if not any(droppable):
            return ids, protected
        if self.same_tokenizer:
            scores = self.compressor.token_surprisal(ids)
        else:
            chars = self.compressor.char_surprisal(text)
            scores = [sum(chars[a:b]) if b > a else math.inf for a, b in offsets]
        units = None
        if self.config.granularity == "sentence":
            spans = [(p.start, p.end) for p in parts if p.droppable]
            units = []
            for a, b in sentence_units(text, spans):
                group = [i for i, (s, e) in enumerate(offsets) if e > s and a <= s and e <= b]
                if group:
                    units.append(group)
        kept = choose_kept(scores, droppable, budget, units)
        return [ids[i] for i in kept], protected

    def sent_prompt(self, request: Request) -> list[int]:
        return self.compress(request)

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch

        from ._hf import kv_cache
        from ._kv import held, new_cache

        hf = self.hf
        with torch.inference_mode():
            ids, protected = self.compressed(request)  # inside the timed TTFT: part of the lever's cost
            probe.mark("compress")
            cache = new_cache(hf.model)
            input_ids = torch.tensor([ids], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
        kv_tokens, kv_bytes = held(cache)  # the compressor's own cache is gone once it has scored
        n = len(request.input_ids)
        return Output(
            token_ids=tokens,
            text=hf.decode(tokens),
            finish_reason=reason,  # type: ignore[arg-type]
            trimmed_tokens=n - len(ids),
            compress_rate=min(1.0, self._budget(n) / n) if n else 1.0,
            kv_held_tokens=kv_tokens,
            kv_held_bytes=kv_bytes,
            compress_protected=protected,
        )

    def close(self) -> None:
        del self.compressor
        super().close()


class PromptCompressionStrategy(Strategy[PromptCompressionConfig]):
    name = "prompt-compression"
    lever = "prompt compression"
    phase = "prefill"
    description = (
        "Compress the prompt: a compressor model's least surprising tokens are dropped before the prefill"
    )
    Config = PromptCompressionConfig

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[PromptCompressionConfig], device: Device) -> Session:
        import dataclasses

        from workbench.strategy import StrategyError

        from ._hf import load_hf_model

        config = variant.config
        hf = load_hf_model(variant, device)
        source = config.compressor or variant.model
        compressor = hf
        if config.compressor or config.compressor_layers:
            kwargs: dict[str, Any] = {}
            if config.compressor_layers:
                kwargs = _truncated(source, config.compressor_layers, variant.trust_remote_code)
            compressor = load_hf_model(
                dataclasses.replace(variant, model=source), device, model_kwargs=kwargs
            )
        same = compressor is hf or compressor.tokenizer.get_vocab() == hf.tokenizer.get_vocab()
        # the target's tokens are mapped to characters; another compressor's tokens too
        slow = [variant.model] if not hf.tokenizer.is_fast else []
        if not same and not compressor.tokenizer.is_fast:
            slow.append(source)
        if slow:
            raise StrategyError(
                f"prompt-compression needs a fast tokenizer (character offsets); {slow[0]!r} has a slow one"
            )
        return PromptCompressionSession(hf, config, compressor, same)


def _truncated(source: str, layers: int, trust_remote_code: bool) -> dict[str, Any]:
    """``from_pretrained`` keywords that build only the first ``layers`` layers of ``source``."""
    from transformers import AutoConfig

    from workbench.sources import materialize, parse_source
    from workbench.strategy import StrategyError

    where = materialize(parse_source(source))
    config = AutoConfig.from_pretrained(
        where.location, trust_remote_code=trust_remote_code, local_files_only=where.local_files_only
    )
    text = getattr(config, "get_text_config", lambda: config)()
    total = getattr(text, "num_hidden_layers", None)
    if not total or layers > total:
        raise StrategyError(f"compressor_layers = {layers}, but {source!r} has {total} layers")
    kwargs: dict[str, Any] = {"num_hidden_layers": layers}
    if getattr(text, "layer_types", None):
        kwargs["layer_types"] = list(text.layer_types)[:layers]
    return kwargs
