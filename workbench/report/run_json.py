"""One run's analysis as JSON (``workbench show --json``, ``workbench noise --json``, export's
``summary.json``): :meth:`workbench.analysis.run.RunAnalysis.to_dict`'s figures with the advice in
words beside them."""

from __future__ import annotations

from typing import Any

from workbench.analysis.run import RunAnalysis
from workbench.report.drafting import drafting_advice
from workbench.report.targets import target_advice

__all__ = ["analysis_dict"]


def analysis_dict(analysis: RunAnalysis) -> dict[str, Any]:
    """The analysis' data with ``target_advice`` (per workload: who meets the targets, what would it
    take) after ``goodput`` and ``drafting_advice`` (does drafting pay) after ``break_even``."""
    words = {
        "goodput": ("target_advice", target_advice(analysis.target_gaps)),
        "break_even": ("drafting_advice", drafting_advice(analysis.break_even)),
    }
    out: dict[str, Any] = {}
    for key, value in analysis.to_dict().items():
        out[key] = value
        if key in words:
            name, text = words[key]
            out[name] = text
    return out
