"""Is a lossless variant equivalent to the baseline, numerically? Facts; the words are
:mod:`workbench.report.equivalence`'s.

A lossless strategy (speculative decoding, prompt lookup, a prefix cache) computes what its model
computes, only in other shapes of forward passes: a verify pass reads k + 1 positions in one matmul, a
prefix cache prefills a suffix after cached keys and values. In float32 the rounding differences are
far below any gap between two tokens' logits, so its greedy output is the baseline's, exactly. In
bfloat16 or float16 they are not: where the baseline's two best tokens are nearly tied, the other
shape can pick the other one, and from there the outputs differ. That is arithmetic, not a bug — and a
bug looks the same in the ``match`` column. This module tells them apart from what the quality pass
stored (docs/metrics.md, "Equivalence"):

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

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from workbench.store import Store, TrialRecord

__all__ = [
    "FLOOR_FACTOR",
    "Divergence",
    "Equivalence",
    "EquivalenceStatus",
    "Floor",
    "FloorShape",
    "RunEquivalence",
    "classify_divergence",
    "floor_figures",
    "run_equivalence",
]

#: a KLD is "within the floor" when at most this many times the floor's largest mean KLD (a lossless
#: variant scored through its own shape measures that shape's floor again, in its own process)
FLOOR_FACTOR = 2.0
#: a KLD this small counts as zero (float32 rounding of identical arithmetic): within any floor
_ZERO_KLD = 1e-9

#: identical: every greedy output is the baseline's; equivalent: the outputs that differ do so at
#: near-ties and the KLD is within the floor; unexplained: a divergence the floor does not explain,
#: or a KLD outside it (a bug signal); mismatch: in float32 any difference is an error; unchecked:
#: outputs differ and there is no floor to judge them by
EquivalenceStatus = Literal["identical", "equivalent", "unexplained", "mismatch", "unchecked"]


def floor_figures(base: Mapping[str, Any], shaped: Mapping[str, Any]) -> dict[str, np.ndarray]:
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
    """One lossless variant's check (its greedy outputs, its KLD, the floor)."""

    variant: str
    shape: str | None  # the shape it was scored through (None: its KLD was not measured)
    dtype: str | None
    kld: float | None  # mean KLD from the reference over its scored positions
    floor: Floor | None
    outputs: int  # greedy outputs compared with the reference
    divergences: tuple[Divergence, ...]

    @property
    def explained(self) -> int:
        return sum(1 for d in self.divergences if d.explained)

    @property
    def within_floor(self) -> bool | None:
        if self.kld is None or self.floor is None:
            return None
        return self.floor.within(self.kld)

    @property
    def status(self) -> EquivalenceStatus:
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
    reference: Sequence[Mapping[str, Any]], output: Sequence[int], margin: float | None
) -> tuple[int, int | None, int | None, float | None, bool | None] | None:
    """``output``'s first difference from the reference output (its rows, in order: ``token_id``,
    ``logprob``, ``top_ids``, ``top_logprobs``): ``(index, baseline token, variant token, gap,
    explained)``; None when identical."""
    tokens = [int(r["token_id"]) for r in reference]
    first = next((i for i, (a, b) in enumerate(zip(output, tokens, strict=False)) if a != b), None)
    if first is None:
        if len(output) == len(tokens):
            return None
        first = min(len(output), len(tokens))
    base = tokens[first] if first < len(tokens) else None
    mine = int(output[first]) if first < len(output) else None
    gap = None
    if base is not None and mine is not None:
        row = reference[first]
        ids = np.frombuffer(row["top_ids"], dtype="<i4")
        lps = np.frombuffer(row["top_logprobs"], dtype="<f4")
        hit = np.flatnonzero(ids == mine)
        if len(hit):
            gap = float(row["logprob"]) - float(lps[hit[0]])
    explained = None if margin is None else (gap is not None and gap <= margin)
    return first, base, mine, gap, explained


def _floor(rows: Iterable[Mapping[str, Any]], dtype: str | None) -> Floor | None:
    by_shape: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_shape[row["shape"]].append(row)
    if not by_shape:
        return None
    shapes = []
    for shape, items in by_shape.items():
        kld = np.array([r["kld"] for r in items], dtype=np.float64)
        shift = np.array([r["top_shift"] for r in items], dtype=np.float64)
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


def run_equivalence(
    store: Store,
    run_id: int,
    trials: Sequence[TrialRecord],
    dtypes: Mapping[str, str | None],
    baseline: str | None,
) -> RunEquivalence | None:
    """The run's equivalence checks from the store: None when its quality pass checked no lossless
    variant (runs from before the check, or without a pass). ``trials``: the measured trials;
    ``dtypes``: each variant's resolved dtype."""
    # a lossless variant checked records its shape (not recorded before the check existed)
    rows = [r for r in store.quality_variants(run_id) if r["status"] == "lossless" and r.get("shape")]
    if not rows or baseline is None:
        return None
    floor = _floor(store.quality_floor(run_id), dtypes.get(baseline))
    reference: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in store.quality_reference(run_id):
        reference[(row["workload"], row["prompt_id"])].append(row)
    if not reference:
        return None
    klds: dict[str, list[float]] = defaultdict(list)
    for p in store.quality_positions(run_id):
        if p["source"] == "output":
            klds[p["variant"]].append(float(p["kld"]))
    margin = floor.margin if floor is not None else None
    checks = {}
    for row in rows:
        name = row["variant"]
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
            shape=row.get("shape"),
            dtype=dtypes.get(name),
            kld=float(np.mean(values)) if values else None,
            floor=floor,
            outputs=outputs,
            divergences=tuple(found),
        )
    return RunEquivalence(floor, checks)
