"""The metric table: every figure the workbench measures or judges, once — its label, its unit and its
direction (whether higher is better). The analysis (which metrics a summary computes, which way a
speed-up points), the targets (the spec's keys and how a limit reads), the reports and the GUI all read
it here. The bottom layer, so that spec and analysis can both import it. Imports nothing.

Adding a measured metric (a ``trials`` column): one :class:`Metric` in :data:`METRIC_TABLE` and its key
in :data:`TRIAL_METRICS`; a target on it: its spec key in :data:`TARGET_KEYS`.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["METRIC_TABLE", "TARGET_KEYS", "TRIAL_METRICS", "Metric", "metric"]


class Metric(NamedTuple):
    """A metric's wording and direction. A tuple, ``(label, unit, higher_is_better)``, so that the
    older ``label, unit, higher = ...`` reads of it keep working."""

    label: str  # how tables, checks and charts name it: "TTFT", "decode"
    unit: str  # written after its value: "ms", "tok/s"; "" for a share
    higher_is_better: bool  # the direction: True for a rate (tok/s), False for a time or a cost

    @property
    def direction(self) -> Literal["higher", "lower"]:
        """Which way is better: ``"higher"`` or ``"lower"``."""
        return "higher" if self.higher_is_better else "lower"

    @property
    def header(self) -> str:
        """A table's header for its values: the label and the unit, ``TTFT ms``, ``decode tok/s``."""
        return f"{self.label} {self.unit}".rstrip()

    @property
    def bound(self) -> str:
        """The sign of a limit on it: ``≥`` (a least value, higher is better) or ``≤``."""
        return "≥" if self.higher_is_better else "≤"


#: metric key (a ``trials`` column, or a figure of the quality pass) → its :class:`Metric`
METRIC_TABLE: dict[str, Metric] = {
    "ttft_ms": Metric("TTFT", "ms", False),
    "prefill_tokens_per_s": Metric("prefill", "tok/s", True),
    "tpot_ms": Metric("TPOT", "ms", False),
    "decode_tokens_per_s": Metric("decode", "tok/s", True),
    "e2e_ms": Metric("e2e", "ms", False),
    "decode_phase_ms": Metric(
        "after TTFT", "ms", False
    ),  # e2e − TTFT: the decode phase as the caller sees it
    "itl_p50_ms": Metric("ITL p50", "ms", False),
    "itl_p90_ms": Metric("ITL p90", "ms", False),
    "itl_p99_ms": Metric("ITL p99", "ms", False),
    "peak_memory_mb": Metric("peak", "MB", False),
    "input_tokens": Metric("in", "tok", False),
    "output_tokens": Metric("out", "tok", False),
    # the quality pass's figures (per variant × workload, not per request): the mean KLD from the
    # baseline's predictions, and the share of tokens whose top prediction is the baseline's (0..1)
    "kld_mean": Metric("KLD", "nats", False),
    "same_top": Metric("same top", "", True),
}

#: the metrics measured on every trial (the ``trials`` columns a summary gives a median with its CI)
TRIAL_METRICS: tuple[str, ...] = (
    "ttft_ms",
    "prefill_tokens_per_s",
    "tpot_ms",
    "decode_tokens_per_s",
    "e2e_ms",
    "decode_phase_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p99_ms",
    "peak_memory_mb",
    "input_tokens",
    "output_tokens",
)

#: a workload's ``targets`` key → the metric it limits, in the order targets are listed. The timing
#: targets' keys are their ``trials`` columns; the quality targets name the bound (``kld_max``: the
#: most mean KLD allowed, ``same_top_min``: the least same-top share)
TARGET_KEYS: dict[str, str] = {
    "ttft_ms": "ttft_ms",
    "tpot_ms": "tpot_ms",
    "itl_p90_ms": "itl_p90_ms",
    "itl_p99_ms": "itl_p99_ms",
    "e2e_ms": "e2e_ms",
    "decode_tokens_per_s": "decode_tokens_per_s",
    "kld_max": "kld_mean",
    "same_top_min": "same_top",
}


def metric(key: str) -> Metric:
    """The :class:`Metric` of a metric key or a target key (``kld_max`` → the mean KLD's)."""
    return METRIC_TABLE[TARGET_KEYS.get(key, key)]
