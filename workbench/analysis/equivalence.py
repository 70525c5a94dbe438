"""Is a lossless variant equivalent to the baseline, numerically? Facts; the words are
:mod:`workbench.report.equivalence`'s.

A lossless strategy (speculative decoding, prompt lookup, a prefix cache) computes what its model
computes, only in other shapes of forward passes: a verify pass reads k + 1 positions in one matmul, a
prefix cache prefills a suffix after cached keys and values. In float32 the rounding differences are
far below any gap between two tokens' logits, so its greedy output is the baseline's, exactly. In
bfloat16 or float16 they are not: where the baseline's two best tokens are nearly tied, the other
shape can pick the other one, and from there the outputs differ. That is arithmetic, not a bug — and a
bug looks the same in the ``match`` column. This module tells them apart from what the quality pass
stored (docs/metrics.md, "Equivalence").

The check (:func:`judge_positions`, ``equivalence_positions``): each lossless variant replayed through
its own code path, every emitted position judged on its own token — its own pass's argmax, and the
baseline's argmax or a near-tie of *that position's* floor (the baseline's shift between one pass and
the passes the variant ran) — and its own log-probabilities against the baseline's through the same
passes. Runs recorded before it keep the old check, read as before:

- the **A/A floor** (``quality_floor``): the baseline's own tokens re-scored by the baseline through
  each shape, against its one-pass reference. Per shape, the KLD that arithmetic alone produces, and
  the largest shift of the reference's two best tokens' log-probabilities (the *top shift*);
- each lossless variant's **KLD** from the reference, scored through its own shape
  (``quality_positions``);
- each of its greedy outputs that differs from the baseline's: the **first divergence**, classified
  from the baseline's log-probabilities there (``quality_reference``): **tie-explained** when the gap
  between the baseline's token and the variant's is at most twice the floor's largest top shift (two
  tokens each moved by the rounding can swap only when that close), **unexplained** otherwise.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from workbench.store.loaded import (
    EquivalencePositionRecord,
    FloorRecord,
    LoadedRun,
    QualityVariantRecord,
    ReferenceRecord,
)
from workbench.store.records import TrialRecord

__all__ = [
    "FLOOR_FACTOR",
    "OWN_KLD_FACTOR",
    "Divergence",
    "Equivalence",
    "EquivalenceStatus",
    "Floor",
    "FloorShape",
    "Judged",
    "RunEquivalence",
    "classify_divergence",
    "floor_figures",
    "judge_positions",
    "run_equivalence",
]

#: a KLD is "within the floor" when at most this many times the floor's largest mean KLD (a lossless
#: variant scored through its own shape measures that shape's floor again, in its own process)
FLOOR_FACTOR = 2.0
#: a KLD this small counts as zero (float32 rounding of identical arithmetic): within any floor
_ZERO_KLD = 1e-9
#: the variant's own log-probabilities against the baseline's through the same passes: within what
#: arithmetic explains when their mean KLD over the judged positions is at most this many times the
#: floor's there (the one-pass reference against those passes). Both are differences between two
#: roundings of the same computation; a KLD grows with the square of a log-prob shift, so 4 is the
#: near-tie rule's factor 2 on the log-prob scale.
OWN_KLD_FACTOR = 4.0

#: identical: every greedy output is the baseline's; equivalent: the outputs that differ do so at
#: near-ties and the KLD is within the floor; unexplained: a divergence the floor does not explain,
#: or a KLD outside it (a bug signal); mismatch: in float32 any difference is an error; unchecked:
#: outputs differ and there is no floor to judge them by
EquivalenceStatus = Literal["identical", "equivalent", "unexplained", "mismatch", "unchecked"]


def floor_figures(
    base: Mapping[str, npt.ArrayLike], shaped: Mapping[str, npt.ArrayLike]
) -> dict[str, npt.NDArray[np.float64]]:
    """Per position of one stream, the reference's one-pass ``logprobs`` (``base``) against the same
    model's through another shape (``shaped``): ``kld`` = KL(P_base ‖ P_shaped) and ``top_shift`` =
    the largest |Δ log p| of base's two most likely tokens."""
    lb = np.asarray(base["logprobs"], dtype=np.float64)
    ls = np.asarray(shaped["logprobs"], dtype=np.float64)
    if lb.shape != ls.shape:
        raise ValueError(f"the shapes scored {ls.shape}, the reference {lb.shape}")
    pb = np.exp(lb)
    with np.errstate(invalid="ignore", over="ignore"):
        kld = np.maximum(np.where(pb > 0, pb * (lb - ls), 0.0).sum(axis=1), 0.0)
    top2 = np.argsort(-lb, axis=1, kind="stable")[:, :2]
    shift = np.abs(np.take_along_axis(ls, top2, axis=1) - np.take_along_axis(lb, top2, axis=1)).max(axis=1)
    return {"kld": kld, "top_shift": shift}


@dataclass(frozen=True)
class FloorShape:
    """The A/A floor of one shape: the baseline's tokens through it, against its one-pass reference."""

    shape: str
    positions: int
    kld_mean: float
    kld_p99: float
    kld_max: float
    top_shift_max: float


@dataclass(frozen=True)
class Floor:
    """The run's A/A numerical floor over every shape measured, in the baseline's dtype."""

    shapes: tuple[FloorShape, ...]
    dtype: str | None
    #: True: measured on each lossless variant's own tokens through its own recorded passes, each
    #: position judged against its own (no run-wide margin); False: the old A/A floor
    per_position: bool = False

    @property
    def kld(self) -> float:
        """The largest mean KLD of a shape: what arithmetic alone produces, at most."""
        return max(s.kld_mean for s in self.shapes)

    @property
    def margin(self) -> float:
        """A gap between two tokens' log-probabilities below this is a near-tie: twice the largest
        top shift (each of the two may move by it)."""
        return 2 * max(s.top_shift_max for s in self.shapes)

    def within(self, kld: float) -> bool:
        """True when ``kld`` is what the floor's arithmetic can produce (:data:`FLOOR_FACTOR`)."""
        return kld <= max(FLOOR_FACTOR * self.kld, _ZERO_KLD)

    def times(self, kld: float) -> float | None:
        """``kld`` in multiples of the floor (None when the floor is zero)."""
        return kld / self.kld if self.kld > 0 else None


@dataclass(frozen=True)
class Divergence:
    """One greedy output's first difference from the baseline's reference output."""

    workload: str
    prompt_id: str
    repetition: int
    index: int  # in the output
    baseline_token: int | None  # None: the baseline's output had ended
    variant_token: int | None  # None: the variant's output had ended
    #: log p_base(baseline's token) − log p_base(variant's token) at that position (one-pass
    #: reference); None when either token is missing or outside the reference's top-k
    gap: float | None
    explained: bool | None  # tie-explained; None without a floor to judge by


@dataclass(frozen=True)
class Equivalence:
    """One lossless variant's check. Checked by replay (``judged`` is set): every position of its
    outputs judged on its own tokens and its own passes' log-probabilities (``kld``: its own
    log-probabilities against the baseline's through the same passes). Checked the old way (a run
    from before the replay): its teacher-forced KLD and its outputs' first divergences against a
    run-wide floor."""

    variant: str
    shape: str | None  # the shape it was scored through (None: its KLD was not measured)
    dtype: str | None
    kld: float | None  # mean KLD: its own passes vs the baseline's (replay), else teacher-forced
    floor: Floor | None
    outputs: int  # greedy outputs compared with the reference
    divergences: tuple[Divergence, ...]
    judged: Judged | None = None  # the replay's judgement (None: a run checked the old way)

    @property
    def explained(self) -> int:
        return sum(1 for d in self.divergences if d.explained)

    @property
    def within_floor(self) -> bool | None:
        if self.judged is not None:
            return self.judged.own_within
        if self.kld is None or self.floor is None:
            return None
        return self.floor.within(self.kld)

    @property
    def status(self) -> EquivalenceStatus:
        j = self.judged
        if j is not None:  # judged position by position (docs/metrics.md, "Equivalence")
            if j.positions == 0:
                return "unchecked"
            if self.dtype == "float32" and j.not_argmax:
                return "mismatch"
            if j.unexplained or j.not_own_argmax or j.own_within is False:
                return "unexplained"
            if j.unchecked:  # some prompt not replayed: no claim about it
                return "unchecked"
            # identical: its outputs are the baseline's (a near-tie where the baseline's own decoding
            # took the same runner-up is no difference); equivalent: they differ, at near-ties only
            return "equivalent" if j.near_ties and self.divergences else "identical"
        if self.dtype == "float32" and self.divergences:
            return "mismatch"
        if self.within_floor is False:
            return "unexplained"
        if not self.divergences:
            return "identical"
        if self.floor is None:
            return "unchecked"
        return "equivalent" if self.explained == len(self.divergences) else "unexplained"

    @property
    def lossless(self) -> bool:
        """True when it may be called lossless: identical, or numerically equivalent."""
        return self.status in ("identical", "equivalent")


@dataclass(frozen=True)
class RunEquivalence:
    """The run's floor and each lossless variant's check."""

    floor: Floor | None
    variants: Mapping[str, Equivalence]


def classify_divergence(
    reference: Sequence[ReferenceRecord], output: Sequence[int], margin: float | None
) -> tuple[int, int | None, int | None, float | None, bool | None] | None:
    """``output``'s first difference from the reference output (its rows, in order: ``token_id``,
    ``logprob``, ``top_ids``, ``top_logprobs``): ``(index, baseline token, variant token, gap,
    explained)``; None when identical."""
    found = _first_difference([r.token_id for r in reference], output)
    if found is None:
        return None
    first, base, mine = found
    gap = None
    if base is not None and mine is not None:
        row = reference[first]
        ids = np.frombuffer(row.top_ids, dtype="<i4")
        lps = np.frombuffer(row.top_logprobs, dtype="<f4")
        hit = np.flatnonzero(ids == mine)
        if len(hit):
            gap = float(row.logprob) - float(lps[hit[0]])
    explained = None if margin is None else (gap is not None and gap <= margin)
    return first, base, mine, gap, explained


def _floor(rows: Iterable[FloorRecord], dtype: str | None) -> Floor | None:
    by_shape: dict[str, list[FloorRecord]] = defaultdict(list)
    for row in rows:
        by_shape[row.shape].append(row)
    if not by_shape:
        return None
    shapes = []
    for shape, items in by_shape.items():
        kld = np.array([r.kld for r in items], dtype=np.float64)
        shift = np.array([r.top_shift for r in items], dtype=np.float64)
        shapes.append(
            FloorShape(
                shape=shape,
                positions=len(items),
                kld_mean=float(kld.mean()),
                kld_p99=float(np.quantile(kld, 0.99)),
                kld_max=float(kld.max()),
                top_shift_max=float(shift.max()),
            )
        )
    return Floor(tuple(shapes), dtype)


def run_equivalence(loaded: LoadedRun, baseline: str | None) -> RunEquivalence | None:
    """The run's equivalence checks from its rows: None when its quality pass checked no lossless
    variant (runs from before the check, or without a pass)."""
    variants = [r for r in loaded.quality_variants if r.status == "lossless"]
    if baseline is None:
        return None
    trials = loaded.trials  # the measured ones (warm-ups excluded)
    dtypes = {v.name: v.dtype for v in loaded.variants}
    if any(r.checked for r in variants):  # checked by replay, position by position
        checked = [r for r in variants if r.checked]
        return _replayed(loaded.equivalence_positions, checked, trials, dtypes, baseline)
    # checked the old way: a lossless variant records its shape (not recorded before the check existed)
    rows = [r for r in variants if r.shape]
    if not rows:
        return None
    floor = _floor(loaded.quality_floor, dtypes.get(baseline))
    reference: dict[tuple[str, str], list[ReferenceRecord]] = defaultdict(list)
    for ref_row in loaded.quality_reference:
        reference[(ref_row.workload, ref_row.prompt_id)].append(ref_row)
    if not reference:
        return None
    klds: dict[str, list[float]] = defaultdict(list)
    for p in loaded.quality_positions:
        if p.source == "output":
            klds[p.variant].append(float(p.kld))
    margin = floor.margin if floor is not None else None
    checks = {}
    for row in rows:
        name = row.variant
        outputs = 0
        found = []
        for t in trials:
            if t.variant != name or t.status != "ok" or t.temperature or not t.output_token_ids:
                continue
            ref = reference.get((t.workload, t.prompt_id))
            if ref is None:
                continue
            outputs += 1

            got = classify_divergence(ref, json.loads(t.output_token_ids), margin)
            if got is not None:
                found.append(Divergence(t.workload, t.prompt_id, t.repetition, *got))
        values = klds.get(name)
        checks[name] = Equivalence(
            variant=name,
            shape=row.shape,
            dtype=dtypes.get(name),
            kld=float(np.mean(values)) if values else None,
            floor=floor,
            outputs=outputs,
            divergences=tuple(found),
        )
    return RunEquivalence(floor, checks)


#: a position's verdict: the baseline's argmax; a near-tie its own floor explains; unexplained (the
#: gap is wider than twice that position's floor); not-own-argmax (a greedy decoder emitted a token
#: that is not the argmax of its own pass: an acceptance rule with a tolerance, whatever the baseline)
Verdict = Literal["argmax", "near-tie", "unexplained", "not-own-argmax"]


def _kl(p_log: npt.NDArray[np.float64], q_log: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    pb = np.exp(p_log)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.maximum(np.where(pb > 0, pb * (p_log - q_log), 0.0).sum(axis=1), 0.0)


def judge_positions(
    tokens: Sequence[int],
    ref: npt.ArrayLike,
    shaped: npt.ArrayLike | list[npt.ArrayLike],
    own: npt.ArrayLike | None = None,
) -> dict[str, npt.NDArray[np.float64]]:
    """Every position of one output, judged (docs/metrics.md, "Equivalence"). ``tokens``: the
    variant's emitted tokens; ``ref``: the baseline's one-pass log-probabilities on the variant's own
    prefix (``[n, vocab]``); ``shaped``: the baseline's through the passes the variant ran (a list of
    several: the shapes it may have run, for an output whose passes were not recorded — each
    position's floor is then the largest of theirs); ``own``: the variant's own passes' (None for an
    output whose passes were not recorded).

    Per position: ``base_top`` (the baseline's argmax) and ``gap`` (log p_ref(base_top) − log
    p_ref(token)); the position's floor ``floor_shift`` = the larger |Δ log p| of those two tokens
    between one pass and the shape (two tokens each moved by the rounding can swap only when their
    gap is at most the sum of their shifts: the near-tie rule is gap ≤ 2 × floor_shift) and
    ``floor_kld``; with ``own``: ``own_top``, ``own_gap`` (> 0: the token is not its own pass's
    argmax), ``own_shift`` (the two tokens' |Δ log p| between the variant's pass and the baseline's
    through the same shape) and ``own_kld``; and the ``verdict``."""
    lr = np.asarray(ref, dtype=np.float64)
    candidates = [np.asarray(s, dtype=np.float64) for s in (shaped if isinstance(shaped, list) else [shaped])]
    tok = np.asarray(tokens, dtype=np.int64)
    if any(ls.shape != lr.shape for ls in candidates) or lr.shape[0] != len(tok):
        raise ValueError(f"{len(tok)} tokens, reference {lr.shape}, shaped {[c.shape for c in candidates]}")
    rows = np.arange(len(tok))
    base_top = lr.argmax(axis=1)
    gap = np.maximum(lr[rows, base_top] - lr[rows, tok], 0.0)
    floor_shift = np.max(
        [
            np.maximum(np.abs(ls[rows, base_top] - lr[rows, base_top]), np.abs(ls[rows, tok] - lr[rows, tok]))
            for ls in candidates
        ],
        axis=0,
    )
    verdict = np.where(tok == base_top, "argmax", np.where(gap <= 2 * floor_shift, "near-tie", "unexplained"))
    ls = candidates[0]
    out: dict[str, npt.NDArray[np.float64]] = {
        "base_top": base_top,
        "gap": gap,
        "floor_shift": floor_shift,
        "floor_kld": np.max([_kl(lr, c) for c in candidates], axis=0),
    }
    if own is not None:
        lo = np.asarray(own, dtype=np.float64)
        if lo.shape != lr.shape:
            raise ValueError(f"own log-probabilities {lo.shape}, reference {lr.shape}")
        own_top = lo.argmax(axis=1)
        own_gap = np.maximum(lo[rows, own_top] - lo[rows, tok], 0.0)  # 0: its argmax, or an exact tie
        out["own_top"] = own_top
        out["own_gap"] = own_gap
        out["own_shift"] = np.maximum(
            np.abs(lo[rows, base_top] - ls[rows, base_top]), np.abs(lo[rows, tok] - ls[rows, tok])
        )
        out["own_kld"] = _kl(ls, lo)
        verdict = np.where(own_gap > 0, "not-own-argmax", verdict)
    out["verdict"] = verdict
    return out


@dataclass(frozen=True)
class Judged:
    """A lossless variant's judged positions, summed up (its ``equivalence_positions`` rows)."""

    prompts: int  # prompts replayed and judged
    outputs: int  # distinct outputs judged (the replays' and the timed ones that differ from them)
    positions: int
    near_ties: int
    unexplained: int
    not_own_argmax: int
    not_argmax: int  # positions whose token is not the baseline's argmax (near-ties included)
    own_kld: float | None  # mean KL(baseline through the shape ‖ the variant's own pass)
    floor_kld: float  # mean KL(one pass ‖ through the shape) over the same positions
    widest_gap: float | None  # the largest gap of an unexplained position
    unchecked: tuple[str, ...] = ()  # why some prompts were not replayed (a line each)

    @property
    def own_within(self) -> bool | None:
        if self.own_kld is None:
            return None
        return self.own_kld <= max(OWN_KLD_FACTOR * self.floor_kld, _ZERO_KLD)


def _judged(rows: Sequence[EquivalencePositionRecord], unchecked: tuple[str, ...]) -> Judged:
    verdicts = [r.verdict for r in rows]
    own = [float(r.own_kld) for r in rows if r.own_kld is not None]
    floor = [float(r.floor_kld or 0.0) for r in rows if r.own_kld is not None]
    gaps = [float(r.gap or 0.0) for r in rows if r.verdict == "unexplained"]
    return Judged(
        prompts=len({(r.workload, r.prompt_id) for r in rows}),
        outputs=len({(r.workload, r.prompt_id, r.output) for r in rows}),
        positions=len(rows),
        near_ties=verdicts.count("near-tie"),
        unexplained=verdicts.count("unexplained"),
        not_own_argmax=verdicts.count("not-own-argmax"),
        not_argmax=sum(1 for r in rows if r.token_id != r.base_top_id),
        own_kld=float(np.mean(own)) if own else None,
        floor_kld=float(np.mean(floor)) if floor else 0.0,
        widest_gap=max(gaps) if gaps else None,
        unchecked=unchecked,
    )


def _replayed(
    positions: Sequence[EquivalencePositionRecord],
    variants: Sequence[QualityVariantRecord],
    trials: Sequence[TrialRecord],
    dtypes: Mapping[str, str | None],
    baseline: str,
) -> RunEquivalence:
    """The checks of a run whose lossless variants were replayed and judged position by position.
    The floor shown is, per variant, its positions' one-pass-vs-its-passes figures (what arithmetic
    alone moved there); each position was judged against its own."""
    by_variant: dict[str, list[EquivalencePositionRecord]] = defaultdict(list)
    for row in positions:
        by_variant[row.variant].append(row)
    baseline_outputs: dict[tuple[str, str], list[int]] = {}
    for t in trials:
        if t.variant == baseline and t.status == "ok" and not t.temperature and t.output_token_ids:
            baseline_outputs.setdefault((t.workload, t.prompt_id), json.loads(t.output_token_ids))
    shapes = []
    checks: dict[str, Equivalence] = {}
    for variant in variants:
        name = variant.variant
        rows = by_variant.get(name, [])
        notes = tuple(json.loads(variant.unchecked)) if variant.unchecked else ()
        judged = _judged(rows, notes if rows else notes or ("not replayed",))
        if rows:
            shapes.append(
                FloorShape(
                    shape=f"{name}'s passes",
                    positions=len(rows),
                    kld_mean=float(np.mean([r.floor_kld for r in rows])),
                    kld_p99=float(np.quantile([r.floor_kld for r in rows], 0.99)),
                    kld_max=float(max(r.floor_kld or 0.0 for r in rows)),
                    top_shift_max=float(max(r.floor_shift or 0.0 for r in rows)),
                )
            )
        # the outputs, distinct per prompt, against the baseline's (a repetition is not an output)
        seen: dict[tuple[str, str], set[str]] = defaultdict(set)
        found = []
        for t in trials:
            if t.variant != name or t.status != "ok" or t.temperature or not t.output_token_ids:
                continue
            key = (t.workload, t.prompt_id)
            if t.output_token_ids in seen[key] or key not in baseline_outputs:
                continue
            seen[key].add(t.output_token_ids)
            first = _first_difference(baseline_outputs[key], json.loads(t.output_token_ids))
            if first is not None:
                found.append(Divergence(t.workload, t.prompt_id, t.repetition, *first, None, None))
        checks[name] = Equivalence(
            variant=name,
            shape=variant.shape,
            dtype=dtypes.get(name),
            kld=judged.own_kld,
            floor=None,
            outputs=sum(len(v) for v in seen.values()),
            divergences=tuple(found),
            judged=judged,
        )
    floor = Floor(tuple(shapes), dtypes.get(baseline), per_position=True) if shapes else None
    if floor is not None:
        checks = {k: dataclasses.replace(c, floor=floor) for k, c in checks.items()}
    return RunEquivalence(floor, checks)


def _first_difference(
    reference: Sequence[int], output: Sequence[int]
) -> tuple[int, int | None, int | None] | None:
    """``output``'s first difference from the reference output's tokens: ``(index, baseline token,
    variant token)`` (None where that output had ended); None when identical."""
    tokens = [int(r) for r in reference]
    first = next((i for i, (a, b) in enumerate(zip(output, tokens, strict=False)) if a != b), None)
    if first is None:
        if len(output) == len(tokens):
            return None
        first = min(len(output), len(tokens))
    return (
        first,
        tokens[first] if first < len(tokens) else None,
        int(output[first]) if first < len(output) else None,
    )
