"""The chart kinds' renderers: one class per kind of chart, with how it is drawn, its size and its hover
read-out, registered by its kind (:func:`~workbench.gui.chartkinds.base.renderer`); the window (its
tabs and tooltips) and the export (PNG, SVG, through :mod:`workbench.gui.charts`) find a chart's
renderer with ``kind_of(chart)``.

The kinds, their tabs and the views that show them are the headless list of
:mod:`workbench.charts.registry`; this package draws them. Importing it imports every module in it,
so a new renderer module is found without being listed anywhere.

Adding a chart kind (docs/architecture.md, "Adding a chart kind"):

1. its data, headless: a module of ``workbench/charts/`` with a :class:`~workbench.charts.base.Chart`
   subclass (a ``key``: the kind; ``rows()``: its CSV), the functions that build it, and its entry
   in the list: ``register_chart(ChartSpec(data, tab, order, run=..., two_runs=...))``;
2. its drawing: a module here with a :class:`~workbench.gui.chartkinds.base.ChartKind` subclass
   decorated with ``@renderer``, its ``data`` the class of step 1, with ``build``, and ``size`` and
   ``describe`` where the defaults (1000 × 580 px; no read-out) do not fit.

``tests/test_charts.py`` fails while a kind of the list has no renderer or a renderer draws a kind the
list lacks.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from workbench.charts.base import Chart
from workbench.charts.registry import chart_kinds
from workbench.gui.chartkinds.base import RENDERERS, ChartKind


def _load() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_load()

__all__ = ["CHART_KINDS", "ChartKind", "kind_of", "unmatched_kinds"]

#: every chart kind's renderer, in the order of the chart kinds' list (those of kinds the list lacks
#: last; :func:`unmatched_kinds` names them)
CHART_KINDS: tuple[ChartKind[Any], ...] = tuple(
    sorted(
        RENDERERS.values(),
        key=lambda r: next((i for i, s in enumerate(chart_kinds()) if s.kind == r.kind), len(RENDERERS)),
    )
)


def kind_of(chart: Chart) -> ChartKind[Any] | None:
    """The renderer that draws ``chart`` (by its kind, its class's ``key``), or None."""
    kind = RENDERERS.get(type(chart).key)
    return kind if kind is not None and type(chart) is kind.data else None


def unmatched_kinds() -> tuple[list[str], list[str]]:
    """The kinds of the chart kinds' list that have no renderer here, and the renderers' kinds the
    list lacks: both empty when every kind has exactly one renderer (a second one is refused when it
    registers)."""
    listed = [s.kind for s in chart_kinds()]
    return [k for k in listed if k not in RENDERERS], [k for k in RENDERERS if k not in listed]
