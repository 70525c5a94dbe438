"""A lossless variant's equivalence in words (the facts: :mod:`workbench.analysis.equivalence`): what
was checked (the positions judged on the variant's own tokens, each against its own floor, the
variant's own logits) and what was not; loudly when a position is not explained by the rounding, when
a greedy decoder emitted a token that is not its own pass's argmax, or when float32 output differs at
all. Runs checked before the replay read as they did ("checked the old way")."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from workbench.formatting import kld_text, num, significant
from workbench.report.model import JSONObject

if TYPE_CHECKING:
    from workbench.analysis.equivalence import Equivalence, Floor, Judged, RunEquivalence
    from workbench.analysis.quality import QualityFigures

__all__ = [
    "EQUIVALENCE_NOTE",
    "OLD_EQUIVALENCE_NOTE",
    "equivalence_data",
    "equivalence_lines",
    "equivalence_note",
    "equivalence_text",
    "floor_line",
]

#: a run checked before the replay: what its figures meant
OLD_EQUIVALENCE_NOTE = (
    "Equivalence (checked the old way): a lossless variant computes its model's arithmetic in other "
    "shapes of forward passes (a verify pass of k + 1 tokens, a suffix after a cached prefix), which half "
    "precision rounds differently. The floor is the baseline's own outputs re-scored by the baseline "
    "through those shapes: the KLD arithmetic alone produces. A divergence is tie-explained when the "
    "baseline's two tokens there were closer than twice the largest shift the floor measured. The "
    "variant's own decoding (its draft, acceptance rule, KV rollback) did not run in this check."
)

EQUIVALENCE_NOTE = (
    "Equivalence: each lossless variant replayed every prompt greedily through its own code path "
    "(its draft, acceptance rule, KV rollback, cached prefix, compiled step), untimed, recording its "
    "target's forward passes and their logits. The baseline then scored prompt + the variant's tokens "
    "in one pass and through those same passes. Every position is judged: the variant's token must be "
    "its own pass's argmax, and the baseline's argmax or a near-tie — a gap at most twice the shift "
    "that position's log-probabilities show between one pass and the variant's passes (its own "
    "floor). The variant's own log-probabilities are compared with the baseline's through the same "
    "passes (same arithmetic: a KLD beyond 4x the floor there is a bug signal). Not checked: sampling "
    "at temperature > 0; prompts not replayed are named."
)


def equivalence_note(equivalence: RunEquivalence) -> str:
    """The note under the quality section's equivalence lines: how this run was checked."""
    replayed = any(getattr(c, "judged", None) is not None for c in equivalence.variants.values())
    return EQUIVALENCE_NOTE if replayed else OLD_EQUIVALENCE_NOTE


def _dtype(check: Equivalence) -> str:
    dtype = check.floor.dtype if check.floor is not None else check.dtype
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype or "", dtype or "")


def _kld_vs_floor(check: Equivalence) -> str:
    if check.kld is None:
        return "KLD not measured"
    if check.floor is None:
        return f"KLD {kld_text(check.kld)}"
    where = "within" if check.within_floor else "OUTSIDE"
    dtype = f"{_dtype(check)} " if _dtype(check) else ""
    return f"KLD {kld_text(check.kld)}, {where} the {dtype}floor {kld_text(check.floor.kld)}"


def _own_kld(judged: Judged) -> str:
    if judged.own_kld is None:
        return "its own logits not compared"
    where = "within" if judged.own_within else "OUTSIDE"
    return (
        f"its own logits' KLD {kld_text(judged.own_kld)} from the baseline's through its passes, {where} "
        f"4x the floor {kld_text(judged.floor_kld)} at those positions"
    )


def _judged_text(check: Equivalence, j: Judged) -> str:
    status = check.status
    what = (
        f"{j.positions} positions of {j.outputs} outputs ({j.prompts} prompts) judged on its own tokens, "
        "each against its own floor"
    )
    missing = f"; not checked: {'; '.join(j.unchecked)}" if j.unchecked else ""
    if status == "identical":
        ties = f", {j.near_ties} at near-ties the baseline's own decoding took too" if j.near_ties else ""
        return (
            f"identical: its outputs are the baseline's, every token the baseline's argmax{ties} "
            f"({what}; {_own_kld(j)}){missing}"
        )
    if status == "equivalent":
        return (
            f"numerically equivalent: {len(check.divergences)} of {check.outputs} outputs differ from the "
            f"baseline's, {j.near_ties} of {j.positions} positions at near-ties within their own floor, the "
            f"rest the baseline's argmax ({what}; {_own_kld(j)}){missing}"
        )
    if status == "mismatch":
        return (
            f"ERROR: output differs in float32 ({j.not_argmax} of {j.positions} positions not the baseline's "
            f"argmax, {what}) — a lossless variant must match the baseline exactly there"
        )
    if status == "unchecked":
        why = "; ".join(j.unchecked) or "nothing replayed"
        if not j.positions:
            return f"not checked ({why}): its equivalence is not claimed"
        return f"partly checked, its equivalence not claimed: {what}, all consistent; not checked: {why}"
    parts = []
    if j.not_own_argmax:
        parts.append(
            f"{j.not_own_argmax} of {j.positions} positions emitted a token that is NOT the argmax of its "
            "own pass (a greedy decoder must)"
        )
    if j.unexplained:
        widest = f", gaps up to {significant(j.widest_gap, 2)} nats" if j.widest_gap is not None else ""
        parts.append(
            f"{j.unexplained} of {j.positions} positions NOT at near-ties of their own floor{widest}"
        )
    if j.own_within is False:
        parts.append(_own_kld(j))
    return f"UNEXPLAINED (a bug signal): {'; '.join(parts)} ({what}){missing}"


def equivalence_text(check: Equivalence) -> str:
    """One lossless variant's check, in a phrase (the verdict's cost, the quality section's line)."""
    if check.judged is not None:
        return _judged_text(check, check.judged)
    return _old_text(check) + " [checked the old way]"


def _old_text(check: Equivalence) -> str:
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


def floor_line(floor: Floor) -> str:
    """The floor: its largest KLD, per shape, and the near-tie margin (the old check's) or the rule
    of each position's own (the replay's)."""
    shapes = ", ".join(f"{s.shape} {kld_text(s.kld_mean)}" for s in floor.shapes)
    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(
        floor.dtype or "", floor.dtype or ""
    )
    if getattr(floor, "per_position", False):
        return (
            f"Numerical floor ({dtype}, the baseline on each lossless variant's tokens, one pass against "
            f"the variant's own passes): KLD up to {kld_text(floor.kld)} ({shapes}); each position's "
            "near-tie is judged against that position's own shift."
        )
    return (
        f"Numerical floor ({dtype}, the baseline's outputs re-scored through other shapes of forward "
        f"passes): KLD up to {kld_text(floor.kld)} ({shapes}); a near-tie is a gap below "
        f"{significant(floor.margin, 2)} nats."
    )


def equivalence_lines(
    equivalence: RunEquivalence | None, scored: Mapping[str, QualityFigures] | Sequence[QualityFigures] = ()
) -> list[str]:
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


def equivalence_data(check: Equivalence) -> JSONObject:
    """One check as JSON-ready facts (``show --json``): with the replay's judgement (``judged``:
    positions, near-ties, unexplained, not_own_argmax, own_kld = the variant's own logits vs the
    baseline's through the same passes, floor_kld at those positions, unchecked) or None for a run
    checked the old way."""
    j = getattr(check, "judged", None)
    return {
        "checked": "replay" if j is not None else "teacher-forced (old)",
        "judged": None if j is None else {**dataclasses.asdict(j), "own_within": j.own_within},
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
