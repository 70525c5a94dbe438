"""The strategy contract: how a variant loads and generates, and how it reports tokens.

A *strategy* only generates. The runner owns the clock: a strategy calls ``probe.step(token_ids)``
each time new tokens are available on the host, and the runner timestamps that step after a device
synchronize. Strategies never time themselves; they may pass sub-splits they measured themselves
(``draft_ms``, ``verify_ms``) through the probe as extra information.

Nothing in this module imports torch: the GUI and the viewer import it.

Writing a strategy (see ``docs/strategies.md``)::

    @dataclass
    class MyConfig:
        window: int = field(default=4, metadata={"help": "tokens looked back"})

    class MyStrategy(Strategy):
        name = "my-trick"
        description = "One line that says what it does"
        Config = MyConfig

        def available(self) -> str | None:
            return None if importlib.util.find_spec("torch") else "needs torch (pip install torch)"

        def load(self, variant: Variant, device: Device) -> Session:
            return MySession(...)

and register it in your package's ``pyproject.toml``::

    [project.entry-points."workbench.strategies"]
    my-trick = "my_pkg.tricks:MyStrategy"
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from .errors import SpecError

if TYPE_CHECKING:
    from .spec import Variant
    from .timing import Device

__all__ = [
    "COMMON_VARIANT_KEYS",
    "Cancelled",
    "ConfigField",
    "NoConfig",
    "Output",
    "Probe",
    "Prompt",
    "Request",
    "Session",
    "Strategy",
    "build_config",
    "config_fields",
    "field_help",
    "model_field",
    "model_source_fields",
]

FinishReason = Literal["eos", "length", "stop"]


class Cancelled(Exception):
    """Raised by :meth:`Probe.step` when the run was cancelled. Strategies let it propagate."""


@dataclass(frozen=True)
class Prompt:
    """One prompt of a workload, before tokenization.

    Exactly one of ``prompt`` (raw text, no chat template) and ``messages`` (chat turns, the model's
    chat template is applied) is set. ``input_tokens`` asks the session to cut the encoded text to
    exactly that many tokens (the input-length sweep).
    """

    id: str
    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    input_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id}
        if self.prompt is not None:
            data["prompt"] = self.prompt
        if self.messages is not None:
            data["messages"] = [dict(m) for m in self.messages]
        if self.input_tokens is not None:
            data["input_tokens"] = self.input_tokens
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Prompt:
        messages = data.get("messages")
        return cls(
            id=str(data["id"]),
            prompt=data.get("prompt"),
            messages=tuple(dict(m) for m in messages) if messages is not None else None,
            input_tokens=data.get("input_tokens"),
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
    reuse); ``trimmed_tokens``: prompt tokens the strategy removed before the prefill (context trimming).
    The prompt's own length (``input_tokens``) is the same for every variant; the tokens actually
    prefilled are ``input_tokens - cached_tokens - trimmed_tokens``.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    input_tokens: int | None = None
    token_count_source: str | None = None
    cached_tokens: int = 0
    trimmed_tokens: int = 0


class Probe(Protocol):
    """Handed to :meth:`Session.generate`; the only way a strategy reports progress."""

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
    timing_scope: str = "in-process"
    #: What the session knows about the server it talks to (URL, version, served model...), stored
    #: with the variant. Never a secret.
    server_info: dict[str, Any] | None = None
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


class Strategy(ABC):
    """A way to load and run a variant. Subclass it, set the class attributes, register it."""

    #: Entry-point name = the spec's ``strategy`` value = the value stored in the DB.
    name: ClassVar[str]
    #: One line for listings and the GUI.
    description: ClassVar[str] = ""
    #: Dataclass of the strategy's parameters; drives validation, the GUI form and the docs.
    Config: ClassVar[type] = NoConfig
    #: False for strategies that do not load a model (test doubles, remote endpoints).
    requires_model: ClassVar[bool] = True
    #: True when a session serves parallel ``generate`` calls (a variant's ``concurrency = N``):
    #: the runner then drives N streams from N threads, each timed by its own probe.
    supports_concurrency: ClassVar[bool] = False
    #: True when its sessions implement :meth:`Session.generate_batch` (a variant's ``batch_size = N``).
    supports_batching: ClassVar[bool] = False

    def available(self) -> str | None:
        """``None`` when the strategy can run here, else one sentence saying why not."""
        return None

    def preflight(self, variant: Variant) -> None:  # noqa: B027 - optional hook
        """Check, before anything is recorded, what only this strategy knows can go wrong with a
        variant here (a missing environment variable...). Raise a ``WorkbenchError``; cheap, no I/O
        beyond the local machine."""

    @abstractmethod
    def load(self, variant: Variant, device: Device) -> Session:
        """Load the model(s) of ``variant`` onto ``device`` (once per variant, not timed per trial)."""


# --- strategy parameters ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigField:
    """One parameter of a strategy, as the GUI form and ``workbench strategies -v`` show it."""

    name: str
    type: str
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    #: declared with :func:`model_field`: names a model source (the GUI offers a model picker)
    model_source: bool = False


def config_fields(config_cls: type) -> list[ConfigField]:
    """Describe the parameters of a strategy's ``Config`` dataclass."""
    hints = typing.get_type_hints(config_cls)
    fields = []
    for f in dataclasses.fields(config_cls):
        annotation = hints[f.name]
        default: Any = f.default
        if f.default is dataclasses.MISSING:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        fields.append(
            ConfigField(
                name=f.name,
                type=_type_name(annotation),
                default=default,
                help=f.metadata.get("help", ""),
                choices=_choices(annotation),
                model_source=bool(f.metadata.get("model_source")),
            )
        )
    return fields


def build_config(config_cls: type, params: dict[str, Any], *, where: str) -> Any:
    """Validate raw spec values against a ``Config`` dataclass and build it.

    ``where`` names the place in the spec for error messages (``variant 'fast'``).
    """
    hints = typing.get_type_hints(config_cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    for key in params:
        if key not in known:
            raise SpecError(f"{where}: unknown key '{key}'{_suggest(key, known | COMMON_VARIANT_KEYS)}")
    values = {key: _coerce(value, hints[key], f"{where}: key '{key}'") for key, value in params.items()}
    try:
        return config_cls(**values)
    except TypeError as exc:  # a required parameter is missing
        raise SpecError(f"{where}: {exc}") from None
    except ValueError as exc:  # __post_init__ validation of the strategy
        raise SpecError(f"{where}: {exc}") from None


# Keys every variant has, beside its strategy parameters (workbench.spec reads them; they are offered
# as suggestions for misspelt keys too).
COMMON_VARIANT_KEYS = frozenset(
    {
        "name",
        "model",
        "strategy",
        "dtype",
        "device",
        "trust_remote_code",
        "concurrency",
        "batch_size",
    }
)


def _suggest(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f"; valid keys: {', '.join(sorted(known))}" if known else ""


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "choice"
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " | ".join(_type_name(a) for a in args) + " | None"
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(annotation) or (Any,)
        return f"list[{_type_name(inner)}]"
    return getattr(annotation, "__name__", str(annotation))


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if origin is Literal:
        choices = typing.get_args(annotation)
        if value not in choices:
            raise SpecError(f"{where} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except SpecError as exc:
                errors.append(exc)
        raise errors[0]
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise SpecError(f"{where} must be a list, got {value!r}")
        (inner, *_) = typing.get_args(annotation) or (Any,)
        items = [_coerce(v, inner, where) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where} must be a table, got {value!r}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where} must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{where} must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise SpecError(f"{where} must be a string, got {value!r}")
        return value
    return value


def field_help(help: str, **kwargs: Any) -> Any:
    """``dataclasses.field`` with a help text: ``x: int = field_help("what x does", default=3)``."""
    return field(metadata={"help": help}, **kwargs)


def model_field(help: str, **kwargs: Any) -> Any:
    """A parameter that names another model source (e.g. a speculative draft). Like the variant's
    ``model``, it is checked before the run and a relative path is taken relative to the spec file."""
    return field(metadata={"help": help, "model_source": True}, **kwargs)


def model_source_fields(config: Any) -> list[str]:
    """Names of a config's parameters declared with :func:`model_field` that are set."""
    if config is None or not dataclasses.is_dataclass(config):
        return []
    return [
        f.name
        for f in dataclasses.fields(config)
        if f.metadata.get("model_source") and getattr(config, f.name)
    ]
