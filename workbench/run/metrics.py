"""Metric definitions (docs/metrics.md; following vLLM's so numbers compare).

Everything here is computed from the raw ``steps`` of a trial, so any figure in ``trials`` can be
recomputed from ``steps`` by an analyst (``tests/test_runner.py`` checks that it is):

- ``ttft_ms``: trial start (tokenized input handed to the strategy) → first step (first token on host).
- ``decode_ms``: first step → last step. ``tpot_ms = decode_ms / (output_tokens - 1)``.
- ``decode_tokens_per_s = (output_tokens - 1) / decode_ms`` — the same tokens as TPOT, inverted.
- ``prefill_tokens_per_s = input_tokens / ttft``.
- ``itl_*``: inter-token latency per *step* (gaps between consecutive steps); a speculative step
  that delivers several tokens is one gap, which is why TPOT is the per-token figure.
- acceptance rate = accepted / proposed; mean accepted length = 1 + accepted / steps with a draft.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["StepRecord", "TrialMetrics", "percentile", "trial_metrics"]


@dataclass(frozen=True)
class StepRecord:
    """One probe step as the runner recorded it."""

    idx: int
    t_ms: float  # since trial start, after a device sync
    n_tokens: int
    draft_proposed: int = 0
    draft_accepted: int = 0
    draft_ms: float | None = None
    verify_ms: float | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrialMetrics:
    output_tokens: int
    ttft_ms: float | None
    prefill_tokens_per_s: float | None
    decode_ms: float | None
    tpot_ms: float | None
    decode_tokens_per_s: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    draft_steps: int

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float | None:
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def trial_metrics(steps: Sequence[StepRecord], input_tokens: int) -> TrialMetrics:
    output_tokens = sum(s.n_tokens for s in steps)
    proposed = sum(s.draft_proposed for s in steps)
    accepted = sum(s.draft_accepted for s in steps)
    draft_steps = sum(s.draft_proposed > 0 for s in steps)
    if not steps:
        return TrialMetrics(
            0, None, None, None, None, None, None, None, None, proposed, accepted, draft_steps
        )
    ttft_ms = steps[0].t_ms
    prefill_tps = input_tokens / (ttft_ms / 1000) if ttft_ms > 0 else None
    decode_ms = steps[-1].t_ms - steps[0].t_ms
    tpot_ms = decode_tps = None
    if output_tokens > 1 and len(steps) > 1:
        tpot_ms = decode_ms / (output_tokens - 1)
        decode_tps = (output_tokens - 1) / (decode_ms / 1000) if decode_ms > 0 else None
    gaps = [b.t_ms - a.t_ms for a, b in itertools.pairwise(steps)]
    return TrialMetrics(
        output_tokens=output_tokens,
        ttft_ms=ttft_ms,
        prefill_tokens_per_s=prefill_tps,
        decode_ms=decode_ms if len(steps) > 1 else 0.0,
        tpot_ms=tpot_ms,
        decode_tokens_per_s=decode_tps,
        itl_p50_ms=percentile(gaps, 50),
        itl_p90_ms=percentile(gaps, 90),
        itl_p99_ms=percentile(gaps, 99),
        draft_tokens_proposed=proposed,
        draft_tokens_accepted=accepted,
        draft_steps=draft_steps,
    )
