"""The one list of chart kinds: every view's charts (one run, two runs compared), the window's chart
tabs and the reports' charts are read from it.

Each chart module of this package registers its kinds as it is imported (:func:`register_chart`): the
chart's data class (its ``key`` is the kind), the :class:`Tab` of the window that shows it, its place
in the report's order, and a builder per view it is shown in (:data:`VIEWS`). :func:`chart_kinds`
imports every module of the package first, so a new module is found without being listed anywhere;
the GUI's renderer of a kind (``workbench/gui/chartkinds/``) registers by the same kind.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from workbench.charts.base import Chart

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis
    from workbench.charts.views import TwoRunsView

__all__ = [
    "VIEWS",
    "ChartSpec",
    "Tab",
    "View",
    "chart_kinds",
    "chart_tabs",
    "charts_of_run",
    "charts_of_two_runs",
    "kinds_in",
    "register_chart",
]

#: the views that show charts: one run (``show``, ``export``, the GUI on one run) and two runs
#: compared (``compare A B --out``, the GUI on two runs)
View = Literal["run", "two_runs"]
VIEWS: tuple[View, ...] = ("run", "two_runs")

#: what a builder returns: one chart, several, or None (the run has no data for it)
Built = Chart | Sequence[Chart] | None


@dataclass(frozen=True)
class Tab:
    """A tab of the window's chart panel: its ``title``, its place among the tabs (``order``), what it
    says when the run has none of its charts (``empty``) and, where its charts are drawn for one run
    at a time, what they are (``one_run_only``: two runs compared, the tab says so instead)."""

    title: str
    order: int
    empty: str
    one_run_only: str | None = None

    @property
    def name(self) -> str:
        """What ``workbench gui --tab`` calls it: the title in lower case, letters and digits only
        (``Speed-up`` → ``speedup``)."""
        return re.sub(r"[^a-z0-9]", "", self.title.lower())


@dataclass(frozen=True)
class ChartSpec:
    """One kind of chart: its data class (``data.key`` is the kind), the tab that shows it, its place
    in the report's order (``order``; within a tab too) and how each view builds it (None: the view
    does not show it)."""

    data: type[Chart]
    tab: Tab
    order: int
    run: Callable[[RunAnalysis], Built] | None = None
    two_runs: Callable[[TwoRunsView], Built] | None = None

    @property
    def kind(self) -> str:
        return self.data.key

    @property
    def views(self) -> tuple[View, ...]:
        return tuple(v for v in VIEWS if getattr(self, v) is not None)


_KINDS: dict[str, ChartSpec] = {}
_loaded = False


def register_chart(spec: ChartSpec) -> ChartSpec:
    """Add a chart kind (called by its module as it is imported); a kind registered twice, or one that
    no view shows, is an error."""
    if not spec.kind:
        raise ValueError(f"{spec.data.__name__} has no key: the key is the chart's kind")
    if spec.kind in _KINDS and _KINDS[spec.kind].data is not spec.data:
        raise ValueError(f"chart kind {spec.kind!r} registered twice")
    if not spec.views:
        raise ValueError(f"chart kind {spec.kind!r} is shown in no view")
    _KINDS[spec.kind] = spec
    return spec


def _load() -> None:
    """Import every module of this package: each registers its chart kinds."""
    global _loaded
    if _loaded:
        return
    package = importlib.import_module(__name__.rpartition(".")[0])  # workbench.charts
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    _loaded = True


def chart_kinds() -> tuple[ChartSpec, ...]:
    """Every chart kind, in the report's order."""
    _load()
    return tuple(sorted(_KINDS.values(), key=lambda s: (s.order, s.kind)))


def chart_tabs() -> tuple[Tab, ...]:
    """The window's chart tabs, in order: those the chart kinds name."""
    tabs = {spec.tab.title: spec.tab for spec in chart_kinds()}
    return tuple(sorted(tabs.values(), key=lambda t: (t.order, t.title)))


def kinds_in(tab: Tab) -> tuple[str, ...]:
    """The kinds a tab shows, in the report's order."""
    return tuple(spec.kind for spec in chart_kinds() if spec.tab.title == tab.title)


def _flat(built: Iterable[Built]) -> list[Chart]:
    out: list[Chart] = []
    for item in built:
        if isinstance(item, Chart):
            out.append(item)
        elif item is not None:
            out.extend(item)
    return out


def charts_of_run(analysis: RunAnalysis) -> list[Chart]:
    """Every chart one run has data for, in the report's order (the GUI's tabs, ``export``, the
    report's figures)."""
    return _flat(spec.run(analysis) for spec in chart_kinds() if spec.run is not None)


def charts_of_two_runs(view: TwoRunsView) -> list[Chart]:
    """Every chart of two runs compared, in the report's order (the GUI's tabs, ``compare A B --out``,
    the comparison's report)."""
    return _flat(spec.two_runs(view) for spec in chart_kinds() if spec.two_runs is not None)
