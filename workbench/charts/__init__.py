"""What each chart shows, headless: plain chart objects (series, labels, units) built from a
:class:`~workbench.analysis.run.RunAnalysis`, one module per chart kind. Their ``rows()`` are the CSV
export; ``workbench.gui.charts`` draws them (the one module that does, for the GUI and for export),
each class by its kind in :data:`workbench.gui.chartkinds.CHART_KINDS`. A new chart class needs a kind
there, and its builder a place in :func:`run_charts`.
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

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis


__all__ = [
    "OKABE_ITO",
    "AcceptanceChart",
    "Axis",
    "BeforeAfterChart",
    "Chart",
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
    "TargetBar",
    "TargetsChart",
    "TimelineChart",
    "acceptance_chart",
    "before_after_chart",
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
    "variant_colours",
]


def run_charts(analysis: RunAnalysis) -> list[Chart]:
    """Every chart a run has data for, in report order."""
    labels = {p.workload: phase_caption(p) for p in analysis.phases}
    compress = {(b.variant, b.workload): b.compress_ms for b in analysis.compression}
    charts: list[Chart | None] = [headline_chart(analysis.summaries, labels, compress)]
    charts.append(speedup_chart(analysis))
    charts.append(quality_chart(analysis))
    charts.append(targets_chart(analysis))
    charts.extend(timeline_charts(analysis))
    charts.extend(sweep_charts(analysis))
    charts.extend(conversation_charts(analysis))
    charts.extend(parameter_sweep_charts(analysis))
    charts.append(draft_position_chart(analysis))
    charts.append(acceptance_chart(analysis))
    charts.append(memory_chart(analysis))
    charts.append(roofline_chart(analysis))
    return [c for c in charts if c is not None and (not isinstance(c, HeadlineChart) or c.groups)]
