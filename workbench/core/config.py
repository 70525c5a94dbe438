"""A strategy's parameters: its ``Config`` dataclass described (for the GUI form and ``workbench
strategies -v``) and built from a spec's keys with precise errors.

Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.core.errors import SpecError, error_context

__all__ = [
    "COMMON_VARIANT_KEYS",
    "ConfigField",
    "build_config",
    "config_fields",
    "field_help",
    "model_field",
    "model_source_fields",
]


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
    # TypeError: a required parameter is missing; ValueError: the strategy's __post_init__ validation
    with error_context(where, SpecError, catch=(TypeError, ValueError)):
        return config_cls(**values)


# Keys every variant has, beside its strategy parameters (workbench.spec.parse reads them; they are offered
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
        "threads",
        "python",
        "compile",
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
