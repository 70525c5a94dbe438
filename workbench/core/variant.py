"""A variant: the named thing a run compares (model source + strategy + its parameters + dtype +
device), as the spec parser builds it and a strategy's ``load`` receives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_args

from workbench.core.literals import CompileMode

__all__ = ["COMPILE_MODES", "DTYPES", "Dtype", "Variant"]

#: a variant's ``compile`` modes (torch.compile's); ``true`` in a spec is ``default``
COMPILE_MODES: tuple[CompileMode, ...] = get_args(CompileMode)

ConfigT = TypeVar("ConfigT")

#: a variant's ``dtype`` (and a strategy parameter that names one, e.g. a draft's): ``auto`` lets the
#: strategy choose for the device
Dtype = Literal["auto", "float32", "float16", "bfloat16"]
DTYPES: tuple[Dtype, ...] = get_args(Dtype)


@dataclass(frozen=True)
class Variant(Generic[ConfigT]):
    """A named thing to compare: model source + strategy + its parameters + dtype + device.

    ``Variant[MyConfig]``: a variant of a ``Strategy[MyConfig]``, whose ``config`` is a ``MyConfig``.
    """

    name: str
    strategy: str  # the strategy's registered name (stored in the DB)
    model: str = ""
    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False
    #: parallel streams (strategies that serve parallel requests, e.g. ``endpoint``); 1 = sequential
    concurrency: int = 1
    #: prompts decoded together in one batch (left padding, attention mask); 1 = one at a time
    batch_size: int = 1
    #: CPU threads for the variant's compute (torch intra-op threads in its worker; runtimes with their
    #: own thread pool, e.g. llama.cpp, read it too); None = the library's default (one per core)
    threads: int | None = None
    #: the Python interpreter its worker process runs with (another virtual environment, with its own
    #: library versions); None = the interpreter running the workbench
    python: str | None = None
    #: torch.compile's mode for its decoding (``default``, ``max-autotune``, ``reduce-overhead``); None =
    #: eager. The spec's ``compile = true`` is ``default`` (docs/strategies.md, "Compiled decoding")
    compile: CompileMode | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: the strategy's ``Config`` instance built from ``params`` (default-constructed when there are
    #: none): never ``None``. Keyword-only and required: the spec parser builds it
    #: (:func:`workbench.core.config.build_config`); code that makes a variant by hand passes one.
    config: ConfigT = field(kw_only=True)
    #: the spec's ``strategy`` value as written: an entry-point name or ``package.module:Class``
    strategy_ref: str = ""
    #: for a variant expanded from a ``sweep``: the swept key and this variant's value
    sweep_param: str | None = None
    sweep_value: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The variant as spec keys (what the worker process receives)."""
        return {
            "name": self.name,
            "strategy": self.strategy_ref or self.strategy,
            "model": self.model,
            "dtype": self.dtype,
            "device": self.device,
            "trust_remote_code": self.trust_remote_code,
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            **({"threads": self.threads} if self.threads is not None else {}),
            **({"python": self.python} if self.python is not None else {}),
            **({"compile": self.compile} if self.compile is not None else {}),
            **self.params,
        }
