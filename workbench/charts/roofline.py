"""The decode roofline: measured decode tok/s against the memory-bandwidth limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeGuard

from workbench.charts.base import Axis, Chart, Row
from workbench.charts.memory import MEMORY_TAB
from workbench.charts.registry import ChartSpec, register_chart
from workbench.formatting import significant

if TYPE_CHECKING:
    from workbench.analysis.roofline import RooflineRow
    from workbench.analysis.run import RunAnalysis


__all__ = ["LimitedRow", "RooflineChart", "roofline_chart"]


class LimitedRow(Protocol):
    """A :class:`~workbench.analysis.roofline.RooflineRow` whose decode speed and limit are both known:
    what the chart draws (:func:`roofline_chart` keeps only those)."""

    @property
    def variant(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def decode_tokens_per_s(self) -> float: ...
    @property
    def limit_tokens_per_s(self) -> float: ...
    @property
    def bandwidth_gbs(self) -> float | None: ...
    @property
    def fraction(self) -> float | None: ...
    def to_dict(self) -> Row: ...


def _limited(row: RooflineRow) -> TypeGuard[LimitedRow]:
    return bool(row.limit_tokens_per_s and row.decode_tokens_per_s)


@dataclass
class RooflineChart(Chart):
    """Measured decode tok/s per variant × workload against the memory-bandwidth limit."""

    key: ClassVar[str] = "roofline"
    rows_: tuple[LimitedRow, ...] = ()
    bandwidth_gbs: float | None = None
    x_axis: Axis = Axis("decode speed", "tok/s")

    def rows(self) -> list[Row]:
        return [r.to_dict() for r in self.rows_]

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(r.workload for r in self.rows_))


def roofline_chart(analysis: RunAnalysis) -> RooflineChart | None:
    rows = tuple(r for r in analysis.roofline if _limited(r))
    if not rows:
        return None
    bandwidths = sorted({round(r.bandwidth_gbs, 1) for r in rows if r.bandwidth_gbs})
    bw = ", ".join(significant(b, 6) for b in bandwidths)
    return RooflineChart(
        title="Decode speed vs the memory-bandwidth limit",
        variants=tuple(analysis.variant_names),
        rows_=rows,
        bandwidth_gbs=bandwidths[0] if bandwidths else None,
        notes=[
            f"Dashed outline: the limit = memory bandwidth ({bw} GB/s, recorded with the run) ÷ bytes read per "
            "token (weights + KV cache at the median length). Speculative variants can pass it (several "
            "tokens per weight read); others only when the copy benchmark understates what the model's reads "
            "reach."
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

register_chart(ChartSpec(RooflineChart, MEMORY_TAB, 120, run=roofline_chart))
