"""What each chart shows, headless: plain chart objects (series, labels, units) built from a
:class:`~workbench.analysis.run.RunAnalysis` (or two runs compared, :class:`TwoRunsView`), one module
per chart kind. Their ``rows()`` are the CSV export; ``workbench.gui.charts`` draws them (the one
module that does, for the GUI and for export), each kind by its renderer in
``workbench.gui.chartkinds``.

Each module registers its kinds in :mod:`workbench.charts.registry` (the kind, the window's tab that
shows it, its place in the report, a builder per view): :func:`run_charts` and :func:`two_runs_charts`
are the one list per view that the GUI, ``export``, ``compare --out`` and the reports read, and the
window's chart tabs are :func:`chart_tabs`. A new chart kind is a new module here (and its renderer in
``workbench/gui/chartkinds/``): nothing else lists it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.charts.acceptance import (
    AcceptanceChart,
    DraftPositionChart,
    PositionSeries,
    acceptance_chart,
    draft_position_chart,
)
from workbench.charts.base import OKABE_ITO, Axis, Chart, lighten, variant_colours
from workbench.charts.before_after import BeforeAfterChart, before_after_chart
from workbench.charts.conversation import ConversationChart, compare_conversation_charts, conversation_charts
from workbench.charts.headline import HeadlineBar, HeadlineChart, HeadlineGroup, headline_chart, phase_caption
from workbench.charts.memory import MemoryBar, MemoryChart, memory_chart
from workbench.charts.quality import QualityChart, QualityPoint, quality_chart
from workbench.charts.registry import (
    ChartSpec,
    Tab,
    chart_kinds,
    chart_tabs,
    charts_of_run,
    charts_of_two_runs,
)
from workbench.charts.roofline import RooflineChart, roofline_chart
from workbench.charts.speedup import SpeedupChart, SpeedupPoint, speedup_chart
from workbench.charts.sweeps import (
    ParameterSweepChart,
    SweepChart,
    SweepSeries,
    parameter_sweep_charts,
    sweep_charts,
)
from workbench.charts.targets import TargetBar, TargetsChart, targets_chart
from workbench.charts.timeline import TimelineChart, timeline_charts
from workbench.charts.views import TwoRunsView, two_runs_view

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis


__all__ = [
    "OKABE_ITO",
    "AcceptanceChart",
    "Axis",
    "BeforeAfterChart",
    "Chart",
    "ChartSpec",
    "ConversationChart",
    "DraftPositionChart",
    "HeadlineBar",
    "HeadlineChart",
    "HeadlineGroup",
    "MemoryBar",
    "MemoryChart",
    "ParameterSweepChart",
    "PositionSeries",
    "QualityChart",
    "QualityPoint",
    "RooflineChart",
    "SpeedupChart",
    "SpeedupPoint",
    "SweepChart",
    "SweepSeries",
    "Tab",
    "TargetBar",
    "TargetsChart",
    "TimelineChart",
    "TwoRunsView",
    "acceptance_chart",
    "before_after_chart",
    "chart_kinds",
    "chart_tabs",
    "compare_conversation_charts",
    "conversation_charts",
    "draft_position_chart",
    "headline_chart",
    "lighten",
    "memory_chart",
    "parameter_sweep_charts",
    "phase_caption",
    "quality_chart",
    "roofline_chart",
    "run_charts",
    "speedup_chart",
    "sweep_charts",
    "targets_chart",
    "timeline_charts",
    "two_runs_charts",
    "two_runs_view",
    "variant_colours",
]


def run_charts(analysis: RunAnalysis) -> list[Chart]:
    """Every chart a run has data for, in report order (:func:`~workbench.charts.registry.charts_of_run`)."""
    return charts_of_run(analysis)


def two_runs_charts(view: TwoRunsView) -> list[Chart]:
    """Every chart of two runs compared, in report order
    (:func:`~workbench.charts.registry.charts_of_two_runs`)."""
    return charts_of_two_runs(view)
