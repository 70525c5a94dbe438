"""Two runs compared: variants matched by name (before and after a driver or library upgrade), RUN_B's
speed-ups over RUN_A with bootstrap CIs.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.analysis.stats import Estimate, bootstrap_median, speedup
from workbench.analysis.summary import _prompts
from workbench.core.errors import WorkbenchError
from workbench.store import TrialRecord

__all__ = ["MergedRuns", "RunComparison", "compare_runs", "merge_runs"]


@dataclass
class RunComparison:
    """One variant × workload measured in two runs (matched by name): RUN_B against RUN_A."""

    variant: str
    workload: str
    run_a: int
    run_b: int
    a: dict[str, Estimate]  # e2e_ms, ttft_ms, tpot_ms, decode_tokens_per_s medians in RUN_A
    b: dict[str, Estimate]
    speedup_e2e: Estimate | None  # A e2e / B e2e: > 1 when RUN_B is faster
    speedup_ttft: Estimate | None
    speedup_decode: Estimate | None  # B decode tok/s / A decode tok/s

    @property
    def significant(self) -> bool | None:
        est = self.speedup_e2e
        if est is None or est.lo is None or est.hi is None:
            return None
        return not (est.lo <= 1.0 <= est.hi)

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "a": {k: v.to_dict() for k, v in self.a.items()},
            "b": {k: v.to_dict() for k, v in self.b.items()},
            "speedup_e2e": self.speedup_e2e.to_dict() if self.speedup_e2e else None,
            "speedup_ttft": self.speedup_ttft.to_dict() if self.speedup_ttft else None,
            "speedup_decode": self.speedup_decode.to_dict() if self.speedup_decode else None,
            "significant": self.significant,
        }


_COMPARED = ("e2e_ms", "ttft_ms", "tpot_ms", "decode_tokens_per_s")


def compare_runs(
    trials_a: Sequence[TrialRecord], trials_b: Sequence[TrialRecord], run_a: int, run_b: int
) -> tuple[list[RunComparison], list[str]]:
    """Variants matched by name across two runs (e.g. before and after a driver or library upgrade),
    per workload both ran: RUN_B's speed-ups over RUN_A with bootstrap CIs (stratified by prompt).
    Returns the comparisons and the variant names found in only one run."""

    def groups(trials: Sequence[TrialRecord]) -> dict[tuple[str, str], list[TrialRecord]]:
        out: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
        for t in trials:
            if t.status == "ok" and not t.warmup:
                out[(t.variant, t.workload)].append(t)
        return out

    ga, gb = groups(trials_a), groups(trials_b)
    results = []
    for key, rows_a in ga.items():
        rows_b = gb.get(key)
        if not rows_b:
            continue
        pa, pb = _prompts(rows_a), _prompts(rows_b)

        def col(rows: list[TrialRecord], name: str) -> list[Any]:
            return [getattr(r, name) for r in rows]

        results.append(
            RunComparison(
                variant=key[0],
                workload=key[1],
                run_a=run_a,
                run_b=run_b,
                a={m: bootstrap_median(col(rows_a, m), pa) for m in _COMPARED},
                b={m: bootstrap_median(col(rows_b, m), pb) for m in _COMPARED},
                speedup_e2e=speedup(col(rows_a, "e2e_ms"), col(rows_b, "e2e_ms"), pa, pb),
                speedup_ttft=speedup(col(rows_a, "ttft_ms"), col(rows_b, "ttft_ms"), pa, pb),
                speedup_decode=speedup(
                    col(rows_b, "decode_tokens_per_s"), col(rows_a, "decode_tokens_per_s"), pb, pa
                ),
            )
        )
    names_a = {t.variant for t in trials_a}
    names_b = {t.variant for t in trials_b}
    unmatched = [f"{n} (only in run {run_a})" for n in sorted(names_a - names_b)]
    unmatched += [f"{n} (only in run {run_b})" for n in sorted(names_b - names_a)]
    return results, unmatched


@dataclass
class MergedRuns:
    """One run's records, or several runs' side by side: with more than one run every variant name
    carries its run (``"3:baseline"``), so same-named variants of two runs stay apart."""

    runs: list[dict[str, Any]]
    variants: list[dict[str, Any]]  # variants rows, names tagged
    trials: list[TrialRecord]  # every trial, warm-ups included (flagged), names tagged
    windows: list[dict[str, Any]]  # server_metrics rows, names tagged
    baseline: str | None  # the reference variant (tagged); None when the runs have none of that name
    failures: list[str] = field(default_factory=list)  # variants that crashed or failed to load


def merge_runs(
    store: Any, runs: Sequence[dict[str, Any]], baseline: str | None = None, *, strict: bool = False
) -> MergedRuns:
    """Read ``runs`` (runs rows) from ``store`` into one record set. ``baseline``: a variant name, as
    ``RUN:variant`` or just ``variant`` for the first run's; by default the first run's baseline.
    ``strict``: a baseline no trial has is an error (the CLI), else it is dropped (the GUI)."""
    tagged = len(runs) > 1

    def tag(run: dict[str, Any], name: str) -> str:
        return f"{run['id']}:{name}" if tagged else name

    merged = MergedRuns(list(runs), [], [], [], None)
    for run in runs:
        for v in store.variants(run["id"]):
            merged.variants.append({**v, "name": tag(run, v["name"])})
            if v["status"] == "failed" and v.get("error"):
                merged.failures.append(f"{tag(run, v['name'])}: {v['error']}")
        trials = store.trials(run["id"], include_warmup=True)
        merged.trials += (
            [dataclasses.replace(t, variant=tag(run, t.variant)) for t in trials] if tagged else trials
        )
        merged.windows += [{**w, "variant": tag(run, w["variant"])} for w in store.server_metrics(run["id"])]
    if baseline is None and runs:
        baseline = runs[0]["baseline"]
        if baseline:
            baseline = tag(runs[0], baseline)
    elif baseline is not None and tagged and ":" not in baseline:
        baseline = tag(runs[0], baseline)
    names = {t.variant for t in merged.trials}
    if baseline is not None and merged.trials and baseline not in names:
        if strict:
            raise WorkbenchError(
                f"baseline variant {baseline!r} not in the run; variants: {', '.join(sorted(names))}"
            )
        baseline = None
    merged.baseline = baseline
    return merged
