"""Strategy registry: the entry-point group ``workbench.strategies`` and ``package.module:Class`` paths.

Built-in strategies (the top-level ``strategies`` package) are registered through the very same
group as third-party plugins; ``workbench`` never imports them directly (an import-linter contract
enforces it). Classes are imported lazily, on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points

from workbench.core.errors import StrategyError, error_context
from workbench.core.strategy import Strategy

__all__ = ["GROUP", "StrategyInfo", "get", "list_strategies", "names"]

GROUP = "workbench.strategies"


@dataclass(frozen=True)
class StrategyInfo:
    """A registered strategy as listings show it."""

    name: str
    target: str  # "package.module:Class"
    description: str
    unavailable: str | None  # None when it can run here, else why not
    cls: type[Strategy] | None  # None when the class itself failed to import

    @property
    def available(self) -> bool:
        return self.unavailable is None


@cache
def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def names() -> list[str]:
    return sorted(_entry_points())


def get(name: str) -> type[Strategy]:
    """The strategy class for a spec's ``strategy`` value: an entry-point name or ``pkg.mod:Class``."""
    if ":" in name:
        return _import_path(name)
    eps = _entry_points()
    if name not in eps:
        raise StrategyError(
            f"unknown strategy '{name}'; available: {', '.join(names()) or '(none registered)'}"
        )
    # a broken plugin must not take the app down
    with error_context(f"strategy '{name}' ({eps[name].value}) failed to import", StrategyError):
        cls = eps[name].load()
    return _check(cls, name)


def _import_path(path: str) -> type[Strategy]:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StrategyError(f"strategy '{path}': cannot import module '{module_name}' ({exc})") from None
    try:
        cls = getattr(module, attr)
    except AttributeError:
        raise StrategyError(f"strategy '{path}': module '{module_name}' has no '{attr}'") from None
    return _check(cls, path)


def _check(cls: object, name: str) -> type[Strategy]:
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise StrategyError(f"strategy '{name}' is not a workbench.strategy.Strategy subclass")
    return cls


def list_strategies() -> list[StrategyInfo]:
    """Every registered strategy and whether it can run here (and why not)."""
    infos = []
    for name, ep in sorted(_entry_points().items()):
        try:
            cls = get(name)
        except StrategyError as exc:
            infos.append(StrategyInfo(name, ep.value, "", str(exc), None))
            continue
        try:
            reason = cls().available()
        except Exception as exc:
            reason = f"availability check failed: {exc}"
        infos.append(StrategyInfo(name, ep.value, cls.description, reason, cls))
    return infos
