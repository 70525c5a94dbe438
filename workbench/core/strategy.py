"""The strategy contract: how a variant loads and generates, and how it reports tokens.

A *strategy* only generates. The runner owns the clock: a strategy calls ``probe.step(token_ids)``
each time new tokens are available on the host, and the runner timestamps that step after a device
synchronize. Strategies never time themselves; they may pass sub-splits they measured themselves
(``draft_ms``, ``verify_ms``) through the probe as extra information.

Nothing in this module imports torch: the GUI and the viewer import it.

Writing a strategy (see ``docs/strategies.md``; import the contract from :mod:`workbench.strategy`)::

    @dataclass
    class MyConfig:
        window: int = field_help("tokens looked back", default=4)

    class MyStrategy(Strategy[MyConfig]):
        name = "my-trick"
        description = "One line that says what it does"
        Config = MyConfig  # may be left out: Strategy[MyConfig] sets it

        def available(self) -> str | None:
            return None if importlib.util.find_spec("torch") else "needs torch (pip install torch)"

        def load(self, variant: Variant[MyConfig], device: Device) -> Session:
            return MySession(variant.config.window, ...)  # a MyConfig, never None

and register it in your package's ``pyproject.toml``::

    [project.entry-points."workbench.strategies"]
    my-trick = "my_pkg.tricks:MyStrategy"
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, get_args, get_origin

from workbench.core.literals import FinishReason, Phase, TimingScope

if TYPE_CHECKING:
    from workbench.core.device import Device
    from workbench.core.variant import Variant

__all__ = [
    "Cancelled",
    "ConfigT",
    "FinishReason",
    "NoConfig",
    "Output",
    "Probe",
    "Prompt",
    "Request",
    "ScoreShape",
    "Session",
    "Strategy",
    "TokenScores",
    "Trace",
]

#: A strategy's parameters dataclass (:attr:`Strategy.Config`): ``Strategy[MyConfig]`` types
#: ``variant.config`` in ``load`` and ``preflight`` as a ``MyConfig``.
ConfigT = TypeVar("ConfigT")


class Cancelled(Exception):
    """Raised by :meth:`Probe.step` when the run was cancelled. Strategies let it propagate."""


@dataclass(frozen=True)
class Prompt:
    """One prompt of a workload, before tokenization.

    Exactly one of ``prompt`` (raw text, no chat template) and ``messages`` (chat turns, the model's
    chat template is applied) is set. ``input_tokens`` asks the session to cut the encoded text to
    exactly that many tokens (the input-length sweep). ``parts``: the named pieces the text was
    joined from (a workload line's ``instruction`` / ``context`` / ``question``, in order, joined by
    blank lines into the raw prompt or the last user message), for a lever that treats them apart
    (prompt compression drops only the context's tokens).
    """

    id: str
    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    input_tokens: int | None = None
    parts: tuple[tuple[str, str], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id}
        if self.prompt is not None:
            data["prompt"] = self.prompt
        if self.messages is not None:
            data["messages"] = [dict(m) for m in self.messages]
        if self.input_tokens is not None:
            data["input_tokens"] = self.input_tokens
        if self.parts is not None:
            data["parts"] = [list(p) for p in self.parts]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Prompt:
        messages = data.get("messages")
        return cls(
            id=str(data["id"]),
            prompt=data.get("prompt"),
            messages=tuple(dict(m) for m in messages) if messages is not None else None,
            input_tokens=data.get("input_tokens"),
            parts=tuple((str(k), str(v)) for k, v in parts) if (parts := data.get("parts")) else None,
        )


@dataclass(frozen=True)
class Request:
    """What the runner hands to :meth:`Session.generate`: tokenized input plus generation settings.

    ``temperature == 0`` means greedy. ``seed`` makes sampling reproducible and is the same for every
    variant, so variants see identical prompts *and* identical random streams.
    """

    prompt: Prompt
    input_ids: tuple[int, ...]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()


@dataclass
class Output:
    """What a strategy generated. ``token_ids`` must equal the concatenation of all probe steps.

    A strategy that reported its steps as counts (``probe.step(n_tokens=...)``, e.g. a server that
    streams text) returns ``token_ids=[]``; the trial then keeps the text only. ``input_tokens``
    overrides ``len(request.input_ids)`` when the prompt was tokenized elsewhere (the server's own
    count); ``token_count_source`` records how the tokens were counted (stored with the trial).

    ``cached_tokens``: prompt tokens whose keys/values came from a cache instead of a prefill (KV-cache
    reuse); ``trimmed_tokens``: prompt tokens the strategy removed before the prefill (context trimming,
    prompt compression). The prompt's own length (``input_tokens``) is the same for every variant; the
    tokens actually prefilled are ``input_tokens - cached_tokens - trimmed_tokens``. ``compress_rate``:
    the share of the prompt a compressing strategy was asked to keep (the achieved share is
    ``1 - trimmed_tokens / input_tokens``); ``None`` for strategies that do not compress.

    ``kv_held_tokens`` / ``kv_held_bytes``: the KV cache the session holds when the answer is done —
    the request's own cache (the prompt it kept and the answer) plus every copy it keeps for later
    requests (a prefix cache's earlier prompts) — in token positions and in bytes of its tensors;
    ``None`` when the runtime cannot tell (never 0 for "unknown").

    ``compress_protected``: the tokens it had to keep, per part of the prompt (the report says which
    part kept the prompt above the budget).
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    input_tokens: int | None = None
    token_count_source: str | None = None
    cached_tokens: int = 0
    trimmed_tokens: int = 0
    compress_rate: float | None = None
    kv_held_tokens: int | None = None
    kv_held_bytes: int | None = None
    #: a compressing strategy: the prompt tokens it may not drop, per part (``{"template": 9,
    #: "question": 520}``); None when it did not need to look (the prompt was within its budget)
    compress_protected: dict[str, int] | None = None


@dataclass
class TokenScores:
    """What :meth:`Session.score` returns: how the model predicts each given token from the ones before
    it (teacher forcing), for the scored positions ``start .. len(token_ids) - 1``, in order.

    A session that computes the whole distribution (an in-process model) fills ``logprobs``: an
    ``[n, vocab]`` float32 array of log-probabilities (log-softmax of the logits, no temperature);
    :meth:`from_logits` builds it from raw logits. A session that only sees what a server returns
    fills ``top_ids`` / ``top_logprobs`` (``[n, k]``, best first) and ``token_logprobs`` (``[n]``, the
    given token's log-probability, wherever it ranked); the quality figures are then bounds (see
    docs/metrics.md). Arrays are numpy arrays or nested lists.
    """

    logprobs: Any = None
    top_ids: Any = None
    top_logprobs: Any = None
    token_logprobs: Any = None

    @classmethod
    def from_logits(cls, logits: Any) -> TokenScores:
        """From an ``[n, vocab]`` array of raw logits (numpy, or anything ``numpy.asarray`` takes):
        the log-softmax, computed in float64 and kept as float32."""
        import numpy as np

        rows = np.asarray(logits, dtype=np.float64)
        top = rows.max(axis=-1, keepdims=True)
        shifted = rows - top
        lse = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        return cls(logprobs=(shifted - lse).astype(np.float32))

    @property
    def full(self) -> bool:
        """True when the whole distribution is known at every position."""
        return self.logprobs is not None


@dataclass(frozen=True)
class ScoreShape:
    """How a strategy's forward passes are shaped when it decodes greedily, so that the quality pass
    can re-score the baseline's tokens the same way (docs/metrics.md, "Equivalence"): the prompt
    prefilled in one pass (after a cached prefix when ``cached_prefix``: the trial's ``cached_tokens``
    first, then the rest), then the output ``chunk`` tokens per pass (1: plain decoding; k + 1: a
    verify pass of k drafted tokens). Half-precision arithmetic rounds each shape differently."""

    chunk: int = 1
    cached_prefix: bool = False

    @property
    def label(self) -> str:
        """How the shape reads in the store and the report (``chunks of 6``, ``cached prefix + 1``)."""
        passes = "one token per pass" if self.chunk == 1 else f"chunks of {self.chunk}"
        return f"cached prefix, {passes}" if self.cached_prefix else passes


class Trace:
    """What a session reports, when asked, about its *target* model's forward passes: the quality
    pass's equivalence check replays each prompt through the variant's own code path, untimed, and
    judges every emitted token (docs/metrics.md, "Equivalence"). ``probe.trace`` is this object during
    such a replay and ``None`` in timed trials: a session reads it once per ``generate`` and, when it
    is not ``None``, reports

    - :meth:`forward` for every forward pass of the target model over the sequence (the prompt's
      prefill, each decode step, each verify pass with its drafts, rejected ones included), and
    - :meth:`emitted` for the tokens it emits, with the logits rows of the target's pass each was
      chosen from.

    A session that never reports is "unchecked": its equivalence is not claimed. Nothing here
    imports torch; the logits may be a torch tensor or an array."""

    __slots__ = ("passes", "produced_by", "rows", "tokens")

    def __init__(self) -> None:
        #: each pass: ``start`` (the position of its first input token), ``ids`` (its input tokens),
        #: ``cached`` (positions whose keys/values it read from a cache it did not compute itself
        #: this request: a reused prefix) and ``keep`` (the logits rows it computed, from the end;
        #: 0 = all), ``built`` (the reused prefix's own history: the first positions of the passes that
        #: computed its keys/values when it was cached, so a check can compute it the same way)
        self.passes: list[dict[str, Any]] = []
        self.tokens: list[int] = []  # the emitted tokens, in order
        self.produced_by: list[int] = []  # per emitted token: the index of the pass it came from
        self.rows: list[Any] = []  # per emitted token: float32 log-probabilities over the vocabulary

    def forward(
        self,
        start: int,
        input_ids: Sequence[int],
        *,
        cached: int = 0,
        keep: int = 0,
        built: Sequence[int] = (),
    ) -> None:
        """A forward pass of the target over ``input_ids`` at positions ``start ..``, after a KV cache
        holding positions ``0 .. start - 1`` (of which the first ``cached`` were reused from an
        earlier request's cache); it computed the last ``keep`` logits rows (0: all). ``built``: where
        the passes that computed the reused prefix began, in order (``(0, 212)``: positions 0-211 in
        one pass, the rest of the prefix in another); empty: unknown, taken as one pass."""
        self.passes.append(
            {
                "start": int(start),
                "ids": [int(t) for t in input_ids],
                "cached": int(cached),
                "keep": int(keep),
                "built": [int(b) for b in built],
            }
        )

    def emitted(self, logits: Any, token_ids: Sequence[int]) -> None:
        """``token_ids`` were emitted, token ``i`` chosen from row ``i`` of ``logits`` (``[n, vocab]``,
        raw scores of the last :meth:`forward` pass, before any temperature)."""
        import numpy as np

        if hasattr(logits, "detach"):  # a torch tensor
            logits = logits.detach().float().cpu().numpy()
        rows = np.asarray(logits, dtype=np.float64).reshape(-1, np.shape(logits)[-1])
        if len(rows) < len(token_ids):
            raise ValueError(f"{len(token_ids)} tokens emitted from {len(rows)} logits rows")
        if not self.passes:
            raise ValueError("Trace.emitted() before any Trace.forward()")
        for row, token in zip(rows, token_ids, strict=False):
            shifted = row - row.max()
            self.rows.append((shifted - np.log(np.exp(shifted).sum())).astype(np.float32))
            self.tokens.append(int(token))
            self.produced_by.append(len(self.passes) - 1)


class Probe(Protocol):
    """Handed to :meth:`Session.generate`; the only way a strategy reports progress."""

    #: ``None`` in timed trials; a :class:`Trace` during the quality pass's untimed replay, which a
    #: session that can reports its target's forward passes to (read it with ``getattr(probe,
    #: "trace", None)`` once per request: a probe from before the trace has no such attribute)
    trace: Trace | None

    def step(
        self,
        token_ids: Sequence[int] = (),
        *,
        n_tokens: int | None = None,
        draft_proposed: int = 0,
        draft_accepted: int = 0,
        draft_ms: float | None = None,
        verify_ms: float | None = None,
    ) -> None:
        """Report tokens that just became available on the host (1 for plain decoding, several for a
        speculative step). The runner synchronizes the device and timestamps the step. Raises
        :class:`Cancelled` when the run is being cancelled.

        A strategy that knows how many tokens arrived but not their ids (a server streaming text)
        passes ``n_tokens`` instead of ``token_ids``."""
        ...

    def recount(self, n_tokens: Sequence[int]) -> None:
        """Replace the token counts of every step reported so far (steps reported with ``n_tokens``
        only), for a strategy that learns how many tokens each step held only once the whole output
        is known (a server that streams text and reports usage at the end). The timestamps stay the
        runner's; steps left with zero tokens are dropped."""
        ...

    def mark(self, phase: Literal["compress"]) -> None:
        """Mark the end of a sub-phase before the first token: the runner reads its clock (after a
        device sync) and records the time from the trial's start as ``{phase}_ms``. ``compress``: a
        prompt-compressing strategy's compression, inside the TTFT (``compress_ms``)."""
        ...

    def end(self) -> None:
        """Mark the end of generation now, for a strategy with untimed bookkeeping left before it
        returns (counting a server's tokens); ``e2e_ms`` ends here instead of at the return."""
        ...


class Session(ABC):
    """A loaded variant: model weights in memory, ready to generate. Created by :meth:`Strategy.load`."""

    #: Longest sequence (input + output tokens) the model accepts; ``None`` when unknown.
    context_length: int | None = None
    #: Size of the weights in memory (MB), for footprint comparisons; ``None`` when unknown.
    weights_mb: float | None = None
    #: What the variant's ``dtype = "auto"`` resolved to (``"float32"``...), for the record.
    dtype: str | None = None
    #: ``"in-process"``: the model runs in the worker, the clock sees the device. ``"client"``: the
    #: session is a client of a server; its figures include network and queueing, and the worker's
    #: memory is not the model's (``peak_memory_mb`` is not recorded). Stored with every trial.
    timing_scope: TimingScope = "in-process"
    #: What the session knows about the server it talks to (URL, version, served model...), stored
    #: with the variant. Never a secret.
    server_info: dict[str, Any] | None = None
    #: Where the runtime computed, when the variant's device does not say it all (a runtime with its
    #: own CPU/GPU placement, e.g. ``"llama.cpp CUDA offload on cuda:0 (17/17 layers)"``), for the record.
    backend: str | None = None
    #: KV-cache bytes one token adds (keys + values, all layers, all models resident), for the
    #: decode roofline; ``None`` when unknown.
    kv_bytes_per_token: float | None = None
    #: The model's ``layers``, ``kv_heads``, ``head_dim``, ``bytes_per_element`` (recorded with the run).
    model_shape: dict[str, int] | None = None

    @abstractmethod
    def encode(self, prompt: Prompt) -> list[int]:
        """Tokenize a prompt (applying the chat template to messages). Not timed."""

    @abstractmethod
    def generate(self, request: Request, probe: Probe) -> Output:
        """Generate for one request, calling ``probe.step`` as tokens appear."""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Token ids back to text (used to build sweep prompts). Default: not supported."""
        raise NotImplementedError(f"{type(self).__name__} cannot decode token ids")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release memory. The worker process ends after its variant anyway."""

    def generate_batch(self, requests: Sequence[Request], probes: Sequence[Probe]) -> list[Output]:
        """Generate for several requests at once (one batch: the same forward passes), reporting each
        request's tokens through its own probe as they appear. Only for strategies with
        ``supports_batching``; the runner starts every probe's clock at the same moment."""
        raise NotImplementedError(f"{type(self).__name__} does not batch")

    def sent_prompt(self, request: Request) -> Sequence[int] | None:
        """The prompt's ids as this session feeds them to the model, for a lever that changes the
        prompt (context trimming, prompt compression); ``None`` (the default): the request's own
        ``input_ids``. Untimed: the quality pass scores the baseline's answer under this prompt, which
        shows how far the answer's distribution moved because the context was cut."""
        return None

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:  # noqa: B027 - optional hook
        """Before the first trial, untimed (its time is recorded as the variant's ``compile_ms``): the
        run's prompt lengths (tokens) and its largest ``max_new_tokens``. A compiled session sizes its
        static KV cache and compiles its graphs here, so that no trial compiles."""

    def score(self, token_ids: Sequence[int], start: int) -> TokenScores:
        """Score a given token sequence (teacher forcing, untimed): for each position ``i`` from
        ``start`` to the end, the model's distribution over the token at ``i`` given ``token_ids[:i]``
        (``start >= 1``). One forward pass over the sequence, no sampling, no KV cache kept. The
        quality pass (docs/metrics.md, "Quality") compares these with the baseline's. Optional: a
        session without it is reported "not scored" in one line and nothing fails."""
        raise NotImplementedError(f"{type(self).__name__} cannot score a token sequence")

    def score_shaped(self, token_ids: Sequence[int], start: int, *, chunk: int, prefix: int) -> TokenScores:
        """:meth:`score` through the forward passes a generation makes (a :class:`ScoreShape`): the
        first ``prefix`` tokens in one pass (0: none), the rest up to ``start`` in one pass, then the
        scored tokens ``chunk`` per pass through the KV cache. Untimed; optional (the quality pass's
        equivalence check says "not checked" without it)."""
        raise NotImplementedError(f"{type(self).__name__} cannot score through its generation's shape")

    def score_passes(
        self,
        token_ids: Sequence[int],
        start: int,
        passes: Sequence[dict[str, Any]],
        produced_by: Sequence[int],
    ) -> TokenScores:
        """:meth:`score` through the forward passes another session's traced replay recorded
        (:class:`Trace`: ``passes``, and per scored token the pass it came from), untimed: the same
        positions computed in the same shapes, for the equivalence check (docs/metrics.md,
        "Equivalence"). Optional: the baseline's session needs it for a lossless variant to be
        checked."""
        raise NotImplementedError(f"{type(self).__name__} cannot score through recorded passes")

    def server_snapshot(self) -> Any:
        """Server-side counters before a group of trials (e.g. a Prometheus scrape), untimed; ``None``
        when the session has no server to ask. Handed back to :meth:`server_figures`."""
        return None

    def server_figures(self, before: Any, requests: int) -> dict[str, Any] | None:
        """The server's own figures for the group of trials since ``before`` (``requests`` of them
        reached the server): the columns of the ``server_metrics`` table. Untimed."""
        return None


@dataclass
class NoConfig:
    """For strategies without parameters."""


class Strategy(ABC, Generic[ConfigT]):
    """A way to load and run a variant. Subclass it, set the class attributes, register it.

    ``Strategy[MyConfig]`` names the parameters' dataclass once: ``Config`` defaults to it, and the
    variant that :meth:`preflight` and :meth:`load` receive has ``config: MyConfig``, always an
    instance (built from the spec's keys, default-constructed when the spec gives none). A plain
    ``Strategy`` subclass (no type parameter) works as well: it sets ``Config`` (or has no parameters,
    :class:`NoConfig`) and sees ``variant.config`` untyped.
    """

    #: Entry-point name = the spec's ``strategy`` value = the value stored in the DB.
    name: ClassVar[str]
    #: One line for listings and the GUI.
    description: ClassVar[str] = ""
    #: Dataclass of the strategy's parameters; drives validation, the GUI form and the docs. Defaults
    #: to the type parameter of ``Strategy[...]``, else :class:`NoConfig`.
    Config: ClassVar[type[Any]] = NoConfig
    #: False for strategies that do not load a model (test doubles, remote endpoints).
    requires_model: ClassVar[bool] = True
    #: True when a session serves parallel ``generate`` calls (a variant's ``concurrency = N``):
    #: the runner then drives N streams from N threads, each timed by its own probe.
    supports_concurrency: ClassVar[bool] = False
    #: True when its sessions implement :meth:`Session.generate_batch` (a variant's ``batch_size = N``).
    supports_batching: ClassVar[bool] = False
    #: None when a variant's ``compile`` applies to it (its session compiles in :meth:`Session.prepare`),
    #: else why not, in a phrase ("its verify pass crops the KV cache..."): the spec refuses in one line
    compile_refusal: ClassVar[str | None] = "it does not run a transformers model in-process"
    #: True when, under greedy decoding, it generates exactly the tokens its model (``variant.model`` at
    #: ``variant.dtype``, plain decoding) generates: a decoding trick (speculation, prompt lookup,
    #: KV-cache reuse), not a change of weights. Only the shapes of its forward passes differ
    #: (:meth:`score_shape`), which half precision rounds differently: when its model and dtype are the
    #: baseline's, the quality pass checks it for numerical equivalence instead of scoring it as lossy
    #: (docs/metrics.md, "Equivalence").
    lossless: ClassVar[bool] = False
    #: The lever it is, in a few words ("speculative decoding"), and the phase it targets
    #: (:data:`~workbench.core.literals.Phase`): the report names a variant by its lever and says when a
    #: lever helped a workload whose other phase dominates (docs/analysis.md, "Prefill or decode?").
    #: None (the default, a runtime or a test double): its strategy's name stands for the lever and no
    #: phase is assumed. Read at analysis time through the registry: a run whose strategy is no longer
    #: installed reads as one that declares none.
    lever: ClassVar[str | None] = None
    phase: ClassVar[Phase | None] = None

    def score_shape(self, variant: Variant[ConfigT]) -> ScoreShape:
        """The shape of its greedy decoding's forward passes (a lossless strategy's check re-scores
        the baseline's tokens in it); plain decoding by default."""
        return ScoreShape()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.phase is not None and cls.phase not in get_args(Phase):
            raise TypeError(
                f"{cls.__name__}: phase = {cls.phase!r} is not one of {', '.join(get_args(Phase))} (or None)"
            )
        declared = _config_parameter(cls)
        if declared is None:
            return
        if "Config" not in cls.__dict__:
            cls.Config = declared
        elif not (isinstance(cls.Config, type) and issubclass(cls.Config, declared)):
            raise TypeError(
                f"{cls.__name__}: Config = {getattr(cls.Config, '__name__', cls.Config)!r} is not the "
                f"{declared.__name__} of Strategy[{declared.__name__}]"
            )

    def available(self) -> str | None:
        """``None`` when the strategy can run here, else one sentence saying why not."""
        return None

    def preflight(self, variant: Variant[ConfigT]) -> None:
        """Check, before anything is recorded, what only this strategy knows can go wrong with a
        variant here (a missing environment variable...). Raise a ``WorkbenchError``; cheap, no I/O
        beyond the local machine."""

    @abstractmethod
    def load(self, variant: Variant[ConfigT], device: Device) -> Session:
        """Load the model(s) of ``variant`` onto ``device`` (once per variant, not timed per trial)."""


def _config_parameter(cls: type) -> type | None:
    """The class ``X`` of a direct base ``Strategy[X]`` of ``cls``, if it names one."""
    for base in getattr(cls, "__orig_bases__", ()):
        if get_origin(base) is Strategy:
            (arg,) = get_args(base)
            return arg if isinstance(arg, type) else None
    return None
