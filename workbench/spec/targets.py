"""Experience targets of a workload: what the feature needs, as limits on the measured metrics.

A workload's ``targets`` table sets any of TTFT, TPOT, ITL p90/p99, e2e (upper limits, ms) and decode
tok/s (a lower limit), each to hold at one percentile of the requests (default p90), and the quality
a variant must keep on the workload (``kld_max``, ``same_top_min``: judged on the quality pass)::

    [[workloads]]
    name = "chat"
    targets = {ttft_ms = 500, tpot_ms = 60, percentile = 90}

The built-in workloads ship defaults (``resources/workloads/index.toml``, reasoning in
``docs/targets.md``); a spec's ``targets`` replaces them whole (``targets = {}``: none). Plain data,
no analysis: :mod:`workbench.analysis.targets` turns targets and trials into verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workbench.core.errors import SpecError
from workbench.core.metrics import TARGET_KEYS, Metric, metric
from workbench.formatting import num, percent

__all__ = ["DEFAULT_PERCENTILE", "QUALITY_TARGETS", "TARGET_METRICS", "Targets", "parse_targets"]

DEFAULT_PERCENTILE = 90.0

#: spec key → its metric (label, unit, higher_is_better): the metric table's, by the target keys
TARGET_METRICS: dict[str, Metric] = {key: metric(key) for key in TARGET_KEYS}
#: the targets judged on the quality pass's figures rather than on each request's timings
QUALITY_TARGETS = ("kld_max", "same_top_min")


@dataclass(frozen=True)
class Targets:
    """Limits per metric (column name → value) that ``percentile`` % of the requests must meet."""

    limits: tuple[tuple[str, float], ...] = ()
    percentile: float = DEFAULT_PERCENTILE
    source: str = "spec"  # "built-in" (the workload's defaults) or "spec"

    @property
    def metrics(self) -> list[str]:
        return [m for m, _ in self.limits]

    def limit(self, metric: str) -> float | None:
        return dict(self.limits).get(metric)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def describe(self) -> str:
        """e.g. ``TTFT ≤ 500 ms, TPOT ≤ 60 ms at p90``."""
        parts = []
        for key, value in self.limits:
            measure = TARGET_METRICS[key]
            shown = percent(value) if key == "same_top_min" else num(value)
            parts.append(f"{measure.label} {measure.bound} {shown} {measure.unit}".rstrip())
        return ", ".join(parts) + f" at p{num(self.percentile)}" if parts else "none"

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.limits), "percentile": self.percentile, "source": self.source}

    def to_table(self) -> dict[str, Any]:
        """The spec's ``targets`` table (what the GUI writes back)."""
        table: dict[str, Any] = {m: _plain(v) for m, v in self.limits}
        if self.percentile != DEFAULT_PERCENTILE:
            table["percentile"] = _plain(self.percentile)
        return table


def parse_targets(value: Any, where: str, *, source: str = "spec") -> Targets:
    """A ``targets`` table → :class:`Targets`; every mistake is one line naming ``where`` and the key."""
    if not isinstance(value, dict):
        raise SpecError(
            f"{where}: 'targets' must be a table, e.g. targets = {{ttft_ms = 500, tpot_ms = 60, percentile = 90}}"
        )
    known = [*TARGET_METRICS, "percentile"]
    limits = []
    percentile = DEFAULT_PERCENTILE
    for key, raw in value.items():
        if key not in known:
            raise SpecError(f"{where}: unknown target '{key}'; targets: {', '.join(known)}")
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw < math.inf:
            raise SpecError(f"{where}: target '{key}' must be a positive number, got {raw!r}")
        if key == "same_top_min" and not raw <= 1:
            raise SpecError(
                f"{where}: target 'same_top_min' is a share of tokens from 0 to 1 (0.9 = 90 %), got {raw!r}"
            )
        if key == "percentile":
            if not 0 < raw < 100:
                raise SpecError(f"{where}: target 'percentile' must be above 0 and below 100, got {raw!r}")
            percentile = float(raw)
        else:
            limits.append((key, float(raw)))
    if not limits and "percentile" in value:
        raise SpecError(
            f"{where}: 'targets' sets a percentile but no limit (add one, e.g. ttft_ms = 500; "
            "targets = {} means no targets)"
        )
    order = list(TARGET_METRICS)
    return Targets(tuple(sorted(limits, key=lambda kv: order.index(kv[0]))), percentile, source)


def _plain(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
