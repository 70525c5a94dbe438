"""Two runs compared: variants matched by name (before and after a driver or library upgrade), RUN_B's
speed-ups over RUN_A with bootstrap CIs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.analysis.stats import Estimate, bootstrap_median, speedup
from workbench.analysis.summary import _prompts

__all__ = ["RunComparison", "compare_runs"]


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
    trials_a: Sequence[dict[str, Any]], trials_b: Sequence[dict[str, Any]], run_a: int, run_b: int
) -> tuple[list[RunComparison], list[str]]:
    """Variants matched by name across two runs (e.g. before and after a driver or library upgrade),
    per workload both ran: RUN_B's speed-ups over RUN_A with bootstrap CIs (stratified by prompt).
    Returns the comparisons and the variant names found in only one run."""

    def groups(trials: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for t in trials:
            if t["status"] == "ok" and not t.get("warmup"):
                out[(t["variant"], t["workload"])].append(t)
        return out

    ga, gb = groups(trials_a), groups(trials_b)
    results = []
    for key, rows_a in ga.items():
        rows_b = gb.get(key)
        if not rows_b:
            continue
        pa, pb = _prompts(rows_a), _prompts(rows_b)

        def col(rows: list[dict[str, Any]], name: str) -> list[Any]:
            return [r.get(name) for r in rows]

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
    names_a = {t["variant"] for t in trials_a}
    names_b = {t["variant"] for t in trials_b}
    unmatched = [f"{n} (only in run {run_a})" for n in sorted(names_a - names_b)]
    unmatched += [f"{n} (only in run {run_b})" for n in sorted(names_b - names_a)]
    return results, unmatched
