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
    """What a strategy generated. ``token_ids`` must equal the concatenation of all probe steps."""

    token_ids: list[int]
    text: str
    finish_reason: FinishReason


class Probe(Protocol):
    """Handed to :meth:`Session.generate`; the only way a strategy reports progress."""

    def step(
        self,
        token_ids: Sequence[int],
        *,
        draft_proposed: int = 0,
        draft_accepted: int = 0,
        draft_ms: float | None = None,
        verify_ms: float | None = None,
    ) -> None:
        """Report tokens that just became available on the host (1 for plain decoding, several for a
        speculative step). The runner synchronizes the device and timestamps the step. Raises
        :class:`Cancelled` when the run is being cancelled."""
        ...


class Session(ABC):
    """A loaded variant: model weights in memory, ready to generate. Created by :meth:`Strategy.load`."""

    #: Longest sequence (input + output tokens) the model accepts; ``None`` when unknown.
    context_length: int | None = None
    #: Size of the weights in memory (MB), for footprint comparisons; ``None`` when unknown.
    weights_mb: float | None = None
    #: What the variant's ``dtype = "auto"`` resolved to (``"float32"``...), for the record.
    dtype: str | None = None

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

    def available(self) -> str | None:
        """``None`` when the strategy can run here, else one sentence saying why not."""
        return None

    def check(self, variant: Variant) -> str | None:
        """``None`` when *this variant* can run here, else why not. Cheap like :meth:`available`
        (no heavy imports); the preflight calls it before a run, so a reason is bad input
        (exit 2), not a run of failed trials. Override it when a parameter needs something
        ``available`` does not check (a back-end package of one method). Default: ``available()``."""
        return self.available()

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
            raise SpecError(f"{where}: unknown key '{key}'{_suggest(key, known | _COMMON_KEYS)}")
    values = {key: _coerce(value, hints[key], f"{where}: key '{key}'") for key, value in params.items()}
    try:
        return config_cls(**values)
    except TypeError as exc:  # a required parameter is missing
        raise SpecError(f"{where}: {exc}") from None
    except ValueError as exc:  # __post_init__ validation of the strategy
        raise SpecError(f"{where}: {exc}") from None


# Keys every variant has (see workbench.spec); offered as suggestions for misspelt keys too.
_COMMON_KEYS = {"name", "model", "strategy", "dtype", "device", "trust_remote_code"}


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
