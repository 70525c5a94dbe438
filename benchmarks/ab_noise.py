"""A/A on the real demo model with a CPU hog partway through: does the design keep the answer honest?

What is measured
    Two identical variants ("A" and "A2": ``demo:smollm2-135m``, baseline, float32) over the built-in
    ``code`` workload (4 prompts, 32 new tokens, ``ignore_eos``), ``--repetitions`` rounds, through the
    real path (``RunExecutor`` → worker processes → store). In each run, once a third of the trials
    have landed, a CPU-burning process starts for ``--hog-s`` seconds (default 30) on one of the
    cores. Each run is analysed like `workbench show`: the e2e speed-up of A2 over A with its 95 % CI,
    whether it is "significant", the CI's half-width, the minimum detectable effect, how many trials
    were flagged disturbed.

    ``--runs`` runs of each design in ``--designs`` (alternated, so the machine's drift hits all):
    ``fresh`` = the default (interleaved, fresh worker processes every repetition, paired statistics
    clustered on the process pairs), ``one`` = interleaved with one worker per variant for the whole
    run (``workers = "one"``: paired, but a slow process passes for a slow variant), ``sequential`` =
    the old order with unpaired ratios of medians (as the workbench reported before). Each row also
    shows A2's CPU time over A's per repetition (geometric mean of the pairs' ``cpu_ms`` ratios): two
    processes of one variant that work at different speeds show there.

    Interleaving overhead: on a quiet machine (no hog), A alone (one worker) and A beside an idle A2
    (two workers, interleaved) alternate for ``--overhead-runs`` runs each; the ratio of A's median
    decode tok/s interleaved over alone must be ≥ 0.98: an idle worker, blocked on its pipe, costs
    the active one nothing.

    ``--auto``: one A/A run with ``repetitions = "auto"``, ``ci_target = --auto-target`` (0.03) and
    ``budget = --budget`` ("5m"), fresh workers, no hog: does it reach the target within the budget?

    ``--effect``: ``--effect-runs`` runs of A against A made ``--slowdown`` (5 %) slower
    (``benchmarks/slowed.py``: the baseline spinning that share of every step's time in CPU), at
    ``--repetitions`` (3), fresh workers, no hog: is a real 5 % difference found? ``--effect-auto``:
    the same with ``repetitions = "auto"`` (``--auto-target``, ``--budget``): found within the budget?

Pass criterion (exit 0; exit 1 otherwise)
    no run of the default design (``fresh``) reports a significant A/A difference (the CI contains
    1.00), every such run's e2e CI is within ±``--max-half-width`` (0.06), and the overhead ratio ≥
    ``--min-ratio`` (0.98); with ``--auto``, the auto run stops on its target (not on the budget or
    the cap); with ``--effect``, each effect run's e2e CI excludes 1.00 and contains the truth
    ``1 / (1 + slowdown)``. The other designs are the contrast, not a criterion.

About 10-12 minutes on a 2-core CPU with the defaults; ``--auto`` adds up to the budget, ``--effect``
about 2 minutes a run.

    python benchmarks/ab_noise.py
    python benchmarks/ab_noise.py --runs 4 --designs fresh --skip-overhead
    python benchmarks/ab_noise.py --runs 6 --designs fresh --auto --effect   # the done-when checks
    python benchmarks/ab_noise.py --skip-aa --skip-overhead --effect-auto     # 5 % found by "auto"?
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import harness
from harness import variant_toml, verdict

from workbench.analysis.run import analyze_run
from workbench.analysis.stats import speedup
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

#: the known difference of the ``effect`` check: the baseline spinning 5 % more CPU at every step
SLOWED = 'strategy = "benchmarks.slowed:SlowedBaseline"\nslowdown = {slowdown}'

SPEC = """
name = "{title}"
repetitions = {reps}
warmup = 1
warmup_max_new_tokens = 8
order = "{order}"
workers = "{workers}"
{top}
{variants}
[[workloads]]
name = "code"
limit = 4
max_new_tokens = 32
ignore_eos = true
"""

HOG = "import time\nt = time.time()\nwhile time.time() - t < {s}:\n    pass\n"


#: design name → (order, workers)
DESIGNS = {
    "fresh": ("interleaved", "per-repetition"),
    "one": ("interleaved", "one"),
    "sequential": ("sequential", "one"),
}


def spec_text(
    title: str,
    design: str,
    reps: int | str,
    names: tuple[str, ...],
    *,
    top: str = "",
    extra: dict[str, str] | None = None,
) -> str:
    order, workers = DESIGNS[design]
    return SPEC.format(
        title=title,
        order=order,
        workers=workers,
        reps=reps,
        top=top,
        variants="".join(variant_toml(n, (extra or {}).get(n, "") + "\n") for n in names),
    )


def cpu_by_repetition(trials: list[dict[str, Any]], variant: str = "A2") -> str:
    """``variant``'s CPU time over A's, per repetition (geometric mean of the pairs' ratios)."""
    a = {(t.prompt_id, t.repetition): t for t in trials if t.variant == "A" and t.cpu_ms}
    logs: dict[int, list[float]] = {}
    for t in trials:
        other = a.get((t.prompt_id, t.repetition))
        if t.variant == variant and t.cpu_ms and other is not None:
            logs.setdefault(t.repetition, []).append(math.log(t.cpu_ms / other.cpu_ms))
    return " ".join(f"{math.exp(statistics.fmean(v)):.3f}" for _, v in sorted(logs.items()))


def run_one(db: Path, text: str, hog_s: float) -> dict[str, Any]:
    """Run a spec, starting the hog once a third of its trials landed; analyse it."""
    store = Store(db)
    hog: dict[str, Any] = {}
    lock = threading.Lock()

    def on_progress(progress: Any) -> None:
        with lock:
            if hog_s and not hog and progress.done >= progress.total / 3:
                hog["proc"] = subprocess.Popen([sys.executable, "-c", HOG.format(s=hog_s)])
                hog["at"] = progress.done

    started = time.time()
    result = RunExecutor(parse_spec(text), store, on_progress=on_progress).run()
    if "proc" in hog:
        hog["proc"].wait()
    analysis = analyze_run(store.load_run(result.run_id))
    trials = store.trials(result.run_id)
    note = store.resolve_run(result.run_id).get("trial_order_note") or ""
    store.close()
    return {
        "analysis": analysis,
        "trials": trials,
        "seconds": time.time() - started,
        "load": os.getloadavg()[0],
        "note": note,
    }


def aa_row(label: str, out: dict[str, Any], variant: str = "A2") -> dict[str, Any]:
    analysis, trials = out["analysis"], out["trials"]
    (s,) = [s for s in analysis.summaries if s.variant == variant]
    if analysis.design.order == "sequential":  # what the workbench reported before: medians, unpaired
        a = [t for t in trials if t.variant == "A" and t.status == "ok"]
        b = [t for t in trials if t.variant == "A2" and t.status == "ok"]
        est = speedup(
            [t.e2e_ms for t in a],
            [t.e2e_ms for t in b],
            [t.prompt_id for t in a],
            [t.prompt_id for t in b],
        )
        mde = None
    else:
        est, mde = s.speedup_e2e, s.speedup_e2e.mde
    significant = est is not None and est.lo is not None and not (est.lo <= 1.0 <= est.hi)
    return {
        "run": label,
        "A2/A e2e": f"{est.value:.3f} [{est.lo:.3f}–{est.hi:.3f}]" if est and est.lo else "",
        "cpu A2/A by rep": cpu_by_repetition(trials, variant),
        "significant": significant,
        "±CI": (max(est.hi / est.value - 1, 1 - est.lo / est.value)) if est and est.lo else None,
        "MDE": mde,
        "disturbed": f"{analysis.design.disturbance.disturbed}/{analysis.design.disturbance.measured}",
        "drift": analysis.design.drift,
        "process ±": est.process_sd if est is not None and hasattr(est, "process_sd") else None,
        "s": out["seconds"],
        "load": out["load"],
        "_est": est,
        "_note": out["note"],
    }


def decode_tps(out: dict[str, Any], variant: str = "A") -> list[float]:
    return [t.decode_tokens_per_s for t in out["trials"] if t.variant == variant and t.status == "ok"]


#: the spec keys of a run with ``repetitions = "auto"``
AUTO_TOP = 'ci_target = {target}\nbudget = "{budget}"\nmax_repetitions = 40'


def parse_args() -> argparse.Namespace:
    parser = harness.parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="A/A runs per design (default 2)")
    parser.add_argument(
        "--designs",
        default="fresh,one,sequential",
        help="comma-separated, of: " + ", ".join(DESIGNS) + " (default: all three)",
    )
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--hog-s", type=float, default=30.0)
    parser.add_argument("--overhead-runs", type=int, default=2)
    parser.add_argument("--min-ratio", type=float, default=0.98)
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-aa", action="store_true")
    parser.add_argument(
        "--max-half-width",
        type=float,
        default=0.06,
        help="criterion: every A/A run of the default design has an e2e CI within ± this (default 0.06)",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help='also run repetitions = "auto" (no hog) with --auto-target and --budget: it must stop on the '
        "target, within the budget",
    )
    parser.add_argument("--auto-target", type=float, default=0.03)
    parser.add_argument("--budget", default="5m")
    parser.add_argument(
        "--effect",
        action="store_true",
        help="also run A against A made --slowdown slower (benchmarks/slowed.py), --repetitions rounds, no "
        "hog: the difference must be found (CI excluding 1, containing the truth)",
    )
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--effect-runs", type=int, default=1)
    parser.add_argument(
        "--effect-auto",
        action="store_true",
        help='also run the --slowdown check with repetitions = "auto" (--auto-target, --budget): the '
        "difference must be found within the budget",
    )
    args = parser.parse_args()
    args.design_list = harness.names(args.designs)
    unknown = [d for d in args.design_list if d not in DESIGNS]
    if unknown and not args.skip_aa:
        parser.error(f"unknown design {unknown[0]!r}; choose from {', '.join(DESIGNS)}")
    return args


def aa_runs(args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    """``--runs`` A/A runs of each design, the hog on one core from a third of the way in."""
    rows = []
    for i in range(args.runs):
        for design in args.design_list:
            out = run_one(
                folder / f"aa-{design}-{i}.db",
                spec_text(f"A/A {design} {i}", design, args.repetitions, ("A", "A2")),
                args.hog_s,
            )
            rows.append({"design": design, **aa_row(f"{design} {i}", out)})
            print(rows[-1], flush=True)
    return rows


def auto_run(args: argparse.Namespace, folder: Path, problems: list[str]) -> dict[str, Any]:
    """An A/A run with ``repetitions = "auto"``: it must stop on its CI target."""
    top = AUTO_TOP.format(target=args.auto_target, budget=args.budget)
    out = run_one(folder / "auto.db", spec_text("auto", "fresh", '"auto"', ("A", "A2"), top=top), 0)
    row = {"design": "auto", **aa_row("auto", out)}
    print(row, flush=True)
    if "every speed-up CI within" not in out["note"]:
        problems.append(f"repetitions = auto did not reach ±{args.auto_target:.0%}: {out['note']}")
    return row


def effect_run(
    args: argparse.Namespace,
    folder: Path,
    problems: list[str],
    design: str,
    label: str,
    reps: int | str,
    top: str = "",
) -> dict[str, Any]:
    """A against A made --slowdown slower: the difference must be found, the truth inside its CI."""
    truth = 1 / (1 + args.slowdown)
    text = spec_text(
        label, "fresh", reps, ("A", "A5"), top=top, extra={"A5": SLOWED.format(slowdown=args.slowdown)}
    )
    out = run_one(folder / f"{label.replace(' ', '-')}.db", text, 0)
    row = {"design": design, **aa_row(label, out, variant="A5")}
    print(row, flush=True)
    est = row["_est"]
    if est is None or est.lo is None or not est.hi < 1.0:
        problems.append(f"{label}: a real {args.slowdown:.0%} slowdown not found ({row['A2/A e2e']})")
    elif not est.lo <= truth <= est.hi:
        problems.append(f"{label}: the CI {row['A2/A e2e']} misses the truth {truth:.3f}")
    return row


def overhead_ratio(args: argparse.Namespace, folder: Path) -> float:
    """A's decode tok/s beside an idle worker over A's alone (the median of each)."""
    alone: list[float] = []
    beside: list[float] = []
    for i in range(args.overhead_runs):
        one = run_one(folder / f"alone-{i}.db", spec_text("A alone", "one", 2, ("A",)), 0)
        alone += decode_tps(one)
        two = run_one(folder / f"beside-{i}.db", spec_text("A beside A2", "one", 2, ("A", "A2")), 0)
        beside += decode_tps(two)
        print(
            f"overhead round {i}: alone {statistics.median(decode_tps(one)):.2f} tok/s, beside an idle "
            f"worker {statistics.median(decode_tps(two)):.2f} tok/s (load {two['load']:.2f})",
            flush=True,
        )
    return statistics.median(beside) / statistics.median(alone)


def print_rows(rows: list[dict[str, Any]], extra_rows: list[dict[str, Any]]) -> None:
    """The table of every run, then the notes of the auto / effect runs."""
    shown = rows + extra_rows
    if shown:
        headers = [h for h in shown[0] if not h.startswith("_")]
        print("  ".join(f"{h:>16}" for h in headers))
        for row in shown:
            print(
                "  ".join(
                    f"{row[h]:>16.3f}" if isinstance(row[h], float) else f"{row[h]!s:>16}" for h in headers
                )
            )
        for row in extra_rows:
            print(f"{row['run']}: {row['_note']}")


def judge_aa(rows: list[dict[str, Any]], args: argparse.Namespace, problems: list[str]) -> None:
    """The A/A criteria of the default design; prints the false findings of every design."""
    false = [r["run"] for r in rows if r["design"] == "fresh" and r["significant"]]
    if false:
        problems.append(f"A/A runs of the default design with a 'significant' difference: {', '.join(false)}")
    wide = [
        r["run"]
        for r in rows
        if r["design"] == "fresh" and (r["±CI"] is None or r["±CI"] > args.max_half_width)
    ]
    if wide:
        problems.append(
            f"A/A runs of the default design wider than ±{args.max_half_width:.0%}: {', '.join(wide)}"
        )
    if rows:
        counts = ", ".join(
            f"{d} {sum(r['significant'] for r in rows if r['design'] == d)} of "
            f"{sum(r['design'] == d for r in rows)}"
            for d in DESIGNS
            if any(r["design"] == d for r in rows)
        )
        print(f"\nfalse findings at 95 %: {counts}")


def main() -> int:
    args = parse_args()
    # benchmarks.slowed (the --effect check's strategy) is found from the repository root, here and in
    # the workers
    root = str(Path(__file__).resolve().parent.parent)
    sys.path.insert(0, root)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    folder = Path(tempfile.mkdtemp(prefix="ab-noise-"))
    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows = aa_runs(args, folder) if not args.skip_aa else []
    problems: list[str] = []
    extra_rows = []
    if args.auto:
        extra_rows.append(auto_run(args, folder, problems))
    if args.effect:
        for i in range(args.effect_runs):
            extra_rows.append(effect_run(args, folder, problems, "effect", f"effect {i}", args.repetitions))
    if args.effect_auto:
        top = AUTO_TOP.format(target=args.auto_target, budget=args.budget)
        extra_rows.append(effect_run(args, folder, problems, "effect-auto", "effect auto", '"auto"', top))
    ratio = overhead_ratio(args, folder) if not args.skip_overhead else None
    print()
    print_rows(rows, extra_rows)
    judge_aa(rows, args, problems)
    if ratio is not None:
        print(f"interleaving overhead: A's decode tok/s beside an idle worker / alone = {ratio:.3f}")
        if ratio < args.min_ratio:
            problems.append(f"overhead ratio {ratio:.3f} < {args.min_ratio}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return verdict(problems, inline=True)


if __name__ == "__main__":
    sys.exit(main())
