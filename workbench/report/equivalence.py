"""A lossless variant's equivalence in words (the facts: :mod:`workbench.analysis.equivalence`):
"numerically equivalent (KLD x, within the bfloat16 floor y; n of m divergences at near-ties)", and
loudly when a divergence is not explained by the rounding, or when float32 output differs at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.formatting import kld_text, num, significant

__all__ = ["EQUIVALENCE_NOTE", "equivalence_data", "equivalence_lines", "equivalence_text", "floor_line"]

EQUIVALENCE_NOTE = (
    "Equivalence: a lossless variant computes its model's arithmetic in other shapes of forward "
    "passes (a verify pass of k + 1 tokens, a suffix after a cached prefix), which half precision "
    "rounds differently. The floor is the baseline's own outputs re-scored by the baseline through "
    "those shapes: the KLD arithmetic alone produces. A divergence is tie-explained when the baseline's "
    "two tokens there were closer than twice the largest shift the floor measured."
)


def _dtype(check: Any) -> str:
    dtype = check.floor.dtype if check.floor is not None else check.dtype
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype or "", dtype or "")


def _kld_vs_floor(check: Any) -> str:
    if check.kld is None:
        return "KLD not measured"
    if check.floor is None:
        return f"KLD {kld_text(check.kld)}"
    where = "within" if check.within_floor else "OUTSIDE"
    dtype = f"{_dtype(check)} " if _dtype(check) else ""
    return f"KLD {kld_text(check.kld)}, {where} the {dtype}floor {kld_text(check.floor.kld)}"


def equivalence_text(check: Any) -> str:
    """One lossless variant's check, in a phrase (the verdict's cost, the quality section's line)."""
    m = len(check.divergences)
    status = check.status
    if status == "identical":
        return f"identical output ({check.outputs} of {check.outputs}; {_kld_vs_floor(check)})"
    if status == "equivalent":
        return f"numerically equivalent ({_kld_vs_floor(check)}; {check.explained} of {m} divergences at near-ties)"
    if status == "mismatch":
        return (
            f"ERROR: output differs in float32 ({m} of {check.outputs} outputs) — a lossless variant "
            "must match the baseline exactly there"
        )
    if status == "unchecked":
        return f"output differs ({m} of {check.outputs} outputs), no numerical floor to judge it by"
    unexplained = m - check.explained
    parts = []
    if unexplained:
        gaps = [d.gap for d in check.divergences if not d.explained and d.gap is not None]
        widest = f", gaps up to {significant(max(gaps), 2)} nats" if gaps else ""
        parts.append(f"{unexplained} of {m} divergences NOT at near-ties{widest}")
    if check.within_floor is False:
        parts.append(_kld_vs_floor(check))
    return "UNEXPLAINED (a bug signal): " + "; ".join(parts)


def floor_line(floor: Any) -> str:
    """The A/A floor: its largest KLD, per shape, and the near-tie margin."""
    shapes = ", ".join(f"{s.shape} {kld_text(s.kld_mean)}" for s in floor.shapes)
    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(
        floor.dtype or "", floor.dtype or ""
    )
    return (
        f"Numerical floor ({dtype}, the baseline's outputs re-scored through other shapes of forward "
        f"passes): KLD up to {kld_text(floor.kld)} ({shapes}); a near-tie is a gap below "
        f"{significant(floor.margin, 2)} nats."
    )


def equivalence_lines(equivalence: Any, scored: Mapping[str, Any] | Sequence[Any] = ()) -> list[str]:
    """The quality section's lines: the floor, each lossless variant's check, and each scored
    variant's KLD against the floor (``scored``: its overall :class:`QualityFigures` by name)."""
    if equivalence is None:
        return []
    out = []
    floor = equivalence.floor
    if floor is not None:
        out.append(floor_line(floor))
    for name, check in equivalence.variants.items():
        shape = f" [{check.shape}]" if check.shape else ""
        out.append(f"{name}{shape}: {equivalence_text(check)}")
    if floor is not None and isinstance(scored, Mapping):
        for name, figures in scored.items():
            if name in equivalence.variants:
                continue
            ratio = floor.times(figures.kld_mean)
            where = "within" if floor.within(figures.kld_mean) else "outside"
            size = f", {num(ratio)}x the floor" if ratio is not None else ""
            out.append(f"{name}: KLD {kld_text(figures.kld_mean)}{size} — {where} the numerical floor")
    return out


def equivalence_data(check: Any) -> dict[str, Any]:
    """One check as JSON-ready facts (``show --json``)."""
    return {
        "status": check.status,
        "shape": check.shape,
        "kld": check.kld,
        "floor_kld": check.floor.kld if check.floor is not None else None,
        "within_floor": check.within_floor,
        "outputs": check.outputs,
        "divergences": len(check.divergences),
        "tie_explained": check.explained,
        "text": equivalence_text(check),
    }
