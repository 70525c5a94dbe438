"""The chart kinds: one class per kind of chart, with how it is drawn, its size and its hover read-out,
and :data:`CHART_KINDS`, the one registry the window (its tabs and tooltips) and the export (PNG,
SVG, through :mod:`workbench.gui.charts`) find a chart's kind in.

A kind draws the headless data classes of :mod:`workbench.charts` named in its ``data`` (matched by
exact type): ``kind_of(chart)`` is the kind that draws ``chart``.

Adding a chart kind:

1. its data, headless: a :class:`~workbench.charts.base.Chart` subclass with a ``key`` and ``rows()``
   (its CSV) and a function that builds it from a run, in a module of ``workbench/charts/``; add that
   function to :func:`workbench.charts.run_charts` (the run's charts, in report order);
2. its drawing: a :class:`~workbench.gui.chartkinds.base.ChartKind` subclass in a module here, with
   ``data`` (the class of step 1), ``tab`` (the window's tab that shows it, a title of
   :data:`workbench.gui.chartview.CHART_TABS`), ``build``, and ``size`` and ``describe`` where the
   defaults (1000 × 580 px; no read-out) do not fit; add an instance to :data:`CHART_KINDS`.

``tests/test_charts.py`` fails while a chart class of :mod:`workbench.charts` has no kind, or a kind
names a tab the window does not have.
"""

from __future__ import annotations

from typing import Any

from workbench.charts.base import Chart
from workbench.gui.chartkinds.acceptance import AcceptanceKind, DraftPositionKind
from workbench.gui.chartkinds.base import ChartKind
from workbench.gui.chartkinds.conversation import ConversationKind
from workbench.gui.chartkinds.headline import HeadlineKind
from workbench.gui.chartkinds.memory import MemoryKind
from workbench.gui.chartkinds.quality import QualityKind
from workbench.gui.chartkinds.roofline import RooflineKind
from workbench.gui.chartkinds.speedup import SpeedupKind
from workbench.gui.chartkinds.sweeps import ParameterSweepKind, SweepKind
from workbench.gui.chartkinds.targets import TargetsKind
from workbench.gui.chartkinds.timeline import TimelineKind

__all__ = ["CHART_KINDS", "ChartKind", "kind_of"]

#: every chart kind; within a tab of the window, its charts' keys are listed in this order
CHART_KINDS: tuple[ChartKind[Any], ...] = (
    HeadlineKind(),
    TimelineKind(),
    SweepKind(),
    ConversationKind(),
    ParameterSweepKind(),
    SpeedupKind(),
    AcceptanceKind(),
    DraftPositionKind(),
    MemoryKind(),
    RooflineKind(),
    TargetsKind(),
    QualityKind(),
)

_BY_DATA: dict[type[Chart], ChartKind[Any]] = {data: kind for kind in CHART_KINDS for data in kind.data}


def kind_of(chart: Chart) -> ChartKind[Any] | None:
    """The kind that draws ``chart`` (by its exact type), or None."""
    return _BY_DATA.get(type(chart))
