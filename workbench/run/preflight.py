"""What is checked before a run records anything, or before it loads one more variant: can each
variant run here (:func:`preflight_spec`), and does the next variant fit beside the ones already
loaded (:class:`Residency`, for interleaved runs)."""

from __future__ import annotations

from workbench.core.config import model_source_fields
from workbench.core.errors import StrategyError, WorkbenchError
from workbench.core.variant import Variant
from workbench.formatting import size
from workbench.run import events as ev
from workbench.run.interpreter import probe
from workbench.spec.parse import Spec

__all__ = ["RESIDENT_MARGIN", "Residency", "preflight_spec"]

#: interleaving loads the next variant only if the device's free memory is at least this many times
#: the largest footprint loaded so far (weights plus what trials add: KV cache, activations)
RESIDENT_MARGIN = 1.5


def preflight_spec(spec: Spec) -> None:
    """Refuse, before anything is recorded, variants that cannot run here: a strategy that is not
    available (torch missing, no GPU...) or a model that cannot be had (an uncached hub id while
    offline, a folder without weights). Raises a :class:`~workbench.core.errors.WorkbenchError`."""
    from workbench.core import registry
    from workbench.sources import parse_source, preflight

    elsewhere: dict[str, list[Variant]] = {}  # variants whose worker runs in another interpreter
    for v in spec.variants:
        strategy_cls = registry.get(v.strategy_ref or v.strategy)
        if v.python is not None:  # its strategy is checked where it will run
            elsewhere.setdefault(v.python, []).append(v)
        else:
            strategy = strategy_cls()
            reason = strategy.available()
            if reason:
                raise StrategyError(
                    f"variant '{v.name}': strategy '{v.strategy}' is not available here: {reason}"
                )
            try:
                strategy.preflight(v)
            except WorkbenchError as exc:
                raise _in_variant(v, exc) from None
        sources = [v.model] if strategy_cls.requires_model else []
        sources += [getattr(v.config, name) for name in model_source_fields(v.config)]
        for source in sources:
            try:
                preflight(parse_source(source))
            except WorkbenchError as exc:
                raise _in_variant(v, exc) from None
    for python, variants in elsewhere.items():
        probe(python, variants)


def _in_variant(variant: Variant, exc: WorkbenchError) -> WorkbenchError:
    """``exc`` with the variant named in front, once (a strategy may have named it already)."""
    message = str(exc)
    if message.startswith((f"variant '{variant.name}'", f"variant {variant.name!r}")):
        return exc
    return type(exc)(f"variant '{variant.name}': {message}")


class Residency:
    """Interleaving keeps every variant loaded at once. After each load: does the device still have
    room for the next one, judged by the largest footprint loaded so far?"""

    def __init__(self) -> None:
        self.largest = 0.0  # MB

    def check(self, loaded: ev.Loaded | None, resident: int, total: int, *, last: bool) -> str | None:
        """None when the next variant may load (or nothing says otherwise), else why not: the note
        the run records when it falls back to counterbalanced blocks. ``resident``: variants loaded
        now, of ``total``; ``last``: this was the last variant to load."""
        if loaded is not None and loaded.footprint_mb is not None:
            self.largest = max(self.largest, loaded.footprint_mb)
        if last or loaded is None or loaded.free_mb is None:
            return None
        need = self.largest * RESIDENT_MARGIN
        if loaded.free_mb >= need:
            return None
        return (
            f"interleaving needs every variant loaded at once: {size(loaded.free_mb, 'GB')} free "
            f"on {loaded.device} after {resident} of "
            f"{total}, the next may need ~{size(need, 'GB')}; ran in counterbalanced "
            'blocks instead (order = "blocks")'
        )
