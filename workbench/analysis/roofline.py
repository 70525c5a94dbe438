"""The memory-bandwidth roofline of decode: how fast decoding could go if reading bytes were all it did.

Each decode step reads every weight once and the KV cache so far, so with memory bandwidth ``B``

    decode tok/s ≤ B / (weight bytes + KV-cache bytes at that length)

(one token per step; a speculative step yields several tokens per weight read, so speculative variants
can exceed this single-token limit, which is exactly their point).

The bandwidth is *measured* where the run happens (the worker process, before the model loads): a
device-to-device copy on CUDA, a multi-threaded numpy copy on CPU, about 0.2 s; the best figure seen is
cached per machine and device in the workbench cache folder (``bandwidth.json``: a busy machine only
lowers a measurement, so a low one never sticks) and stored with the run's
variants (``variants.memory_bandwidth_gbs``, and the run's environment JSON). The analysis then needs no
torch: the viewer computes limits from what was stored. ``$WORKBENCH_BANDWIDTH_GBS`` overrides the
measurement (a datasheet figure, or a test's known value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.store.records import VariantRecord

if TYPE_CHECKING:
    from workbench.analysis.summary import GroupSummary

__all__ = ["FAR_FROM_LIMIT", "RooflineRow", "roofline_rows", "roofline_tokens_per_s"]

#: a one-token decode below this share of its bandwidth limit is not bound by reading its bytes but by
#: what each step costs besides (kernel launches and framework overhead on a GPU, compute on a CPU)
FAR_FROM_LIMIT = 0.5


def roofline_tokens_per_s(
    bandwidth_gbs: float | None,
    weights_mb: float | None,
    kv_bytes_per_token: float | None = None,
    context_tokens: float = 0.0,
) -> float | None:
    """The bandwidth limit of decode tok/s at ``context_tokens`` tokens in the KV cache; ``None`` when
    the bandwidth or the weights are unknown."""
    if not bandwidth_gbs or not weights_mb:
        return None
    bytes_per_token = weights_mb * 2**20 + (kv_bytes_per_token or 0.0) * max(context_tokens, 0.0)
    return bandwidth_gbs * 1e9 / bytes_per_token


@dataclass(frozen=True)
class RooflineRow:
    """One variant on one workload against its bandwidth limit."""

    variant: str
    workload: str
    decode_tokens_per_s: float | None  # measured median
    limit_tokens_per_s: float | None
    bandwidth_gbs: float | None
    weights_mb: float | None
    kv_mb: float | None  # KV cache read per token at the median context
    context_tokens: float  # median input + half the median output: the average decode position

    @property
    def fraction(self) -> float | None:
        """Measured decode tok/s as a share of the limit (above 1 for speculative variants)."""
        if not self.decode_tokens_per_s or not self.limit_tokens_per_s:
            return None
        return self.decode_tokens_per_s / self.limit_tokens_per_s

    @property
    def far_from_limit(self) -> bool | None:
        """True when its decode runs below :data:`FAR_FROM_LIMIT` of the limit (None: no limit)."""
        fraction = self.fraction
        return None if fraction is None else fraction < FAR_FROM_LIMIT

    def to_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "limit_tokens_per_s": self.limit_tokens_per_s,
            "fraction_of_limit": self.fraction,
            "bandwidth_gbs": self.bandwidth_gbs,
            "weights_mb": self.weights_mb,
            "kv_mb": self.kv_mb,
            "context_tokens": self.context_tokens,
        }


def roofline_rows(summaries: Sequence[GroupSummary], variants: Sequence[VariantRecord]) -> list[RooflineRow]:
    """Per variant × workload (``summaries`` from :func:`workbench.analysis.summary.summarize`;
    ``variants``: with the bandwidth, weights and KV size recorded at load)."""
    by_name = {v.name: v for v in variants}
    rows = []
    for s in summaries:
        v = by_name.get(s.variant, VariantRecord())
        context = (s.metrics["input_tokens"].value or 0.0) + (s.metrics["output_tokens"].value or 0.0) / 2
        kv = v.kv_bytes_per_token
        rows.append(
            RooflineRow(
                variant=s.variant,
                workload=s.workload,
                decode_tokens_per_s=s.metrics["decode_tokens_per_s"].value,
                limit_tokens_per_s=roofline_tokens_per_s(v.memory_bandwidth_gbs, v.weights_mb, kv, context),
                bandwidth_gbs=v.memory_bandwidth_gbs,
                weights_mb=v.weights_mb,
                kv_mb=kv * context / 2**20 if kv else None,
                context_tokens=context,
            )
        )
    return rows
