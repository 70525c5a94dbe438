"""How the analysis scales with the number of trials: `show`, `show --json`, `compare`, `export` and the
desktop app's results load on a large run.

The run is written straight into a results database (no worker processes: the analysis only reads
what is stored): by default 2 variants × 50 prompts × 100 repetitions = 10,000 measured trials of 256
tokens each, every trial with its 256 steps, as a fake strategy would leave them (TTFT and per-token
times with log-normal noise; the second variant 10 % faster). Each command runs as a fresh process
(`python -m workbench ...`), timed end to end, three times; the table gives the median.

Criterion: `show` within 2 s at 10,000 trials, and growing sub-linearly: the time at N
trials over the time at N/5 (``--small``, default 2,000) well under 5. The speed-up CIs are checked
against a plain percentile bootstrap of the same pairs (2,000 resamples): the bounds agree within
their own Monte-Carlo error (0.5 % here).

    python benchmarks/analysis_scale.py                 # 10,000 and 2,000 trials
    python benchmarks/analysis_scale.py --prompts 50 --repetitions 400   # 40,000
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
from harness import verdict

from workbench.store import Store


def build(path: Path, prompts: int, repetitions: int, tokens: int, seed: int = 1) -> int:
    """A finished run of 2 variants × prompts × repetitions into ``path``; returns its id."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    run_id = store.create_run(name="scale", spec_text="", baseline="A", version="bench")
    for name in ("A", "B"):
        store.add_variant(
            run_id, {"name": name, "strategy": "fake", "model": "", "dtype": "none", "device": "cpu"}
        )
    steps_rows = []
    trial_rows = []
    for rep in range(repetitions):
        for p in range(prompts):
            for v, (name, speed) in enumerate((("A", 1.0), ("B", 1.0 / 1.1))):
                ttft = 20.0 * (1 + p / prompts) * rng.lognormal(0, 0.05)
                tpot = 8.0 * speed * rng.lognormal(0, 0.05)
                t = ttft + np.cumsum(
                    np.r_[0.0, np.full(tokens - 1, tpot) * rng.lognormal(0, 0.02, tokens - 1)]
                )
                e2e = float(t[-1])
                trial_rows.append(
                    {
                        "run_id": run_id,
                        "variant": name,
                        "strategy": "fake",
                        "model": "",
                        "workload": "code",
                        "prompt_id": f"p{p}",
                        "repetition": rep,
                        "round": rep * prompts + p,
                        "round_position": (v + rep + p) % 2,
                        "warmup": 0,
                        "status": "ok",
                        "input_tokens": 100 + p,
                        "output_tokens": tokens,
                        "max_new_tokens": tokens,
                        "temperature": 0.0,
                        "seed": 0,
                        "ttft_ms": float(t[0]),
                        "tpot_ms": (e2e - t[0]) / (tokens - 1),
                        "decode_tokens_per_s": (tokens - 1) / (e2e - t[0]) * 1000,
                        "prefill_tokens_per_s": (100 + p) / t[0] * 1000,
                        "e2e_ms": e2e,
                        "decode_ms": e2e - float(t[0]),
                        "itl_p50_ms": tpot,
                        "itl_p90_ms": tpot * 1.05,
                        "itl_p99_ms": tpot * 1.1,
                        "timing_scope": "in-process",
                        "concurrency": 1,
                        "batch_size": 1,
                        "disturbed": 0,
                    }
                )
                steps_rows.append(t)
    db = store.db
    with db.conn:
        db.table("trials").insert_all(trial_rows, batch_size=2000)
    ids = [r["id"] for r in db.query("select id from trials where run_id = ? order by id", [run_id])]

    def steps():
        for trial_id, t in zip(ids, steps_rows, strict=True):
            for i, ms in enumerate(t.tolist()):
                yield {"trial_id": trial_id, "idx": i, "t_ms": ms, "n_tokens": 1}

    with db.conn:
        db.table("steps").insert_all(steps(), batch_size=10000)
    store.finish_run(run_id, "ok")
    store.close()
    return run_id


def timed(args: list[str], runs: int = 3) -> float:
    """The median wall time of ``python -m workbench ARGS``, as a user's shell runs it: the modules'
    bytecode cached (a first, untimed run writes it; PYTHONDONTWRITEBYTECODE, which some CI and
    sandbox shells set, would make every run compile the workbench's sources again: +0.3-0.4 s)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "workbench", *args]
    subprocess.run(command, check=True, capture_output=True, env=env)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def host_line() -> str:
    """The CPU, its vector extensions and the load now: show's time depends on all three."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    vector = sorted(f for f in flags if f.startswith(("avx", "fma", "f16c")))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"host: {model or '?'}, {os.cpu_count()} cores, {' '.join(vector) or 'no AVX'}; load {load}"


def gui_load_s(db: Path, run_id: int, runs: int = 3) -> float:
    from workbench.gui.loading import load_results

    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        load_results(db, [run_id])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bootstrap_check(db: Path, run_id: int) -> float:
    """The largest difference between the product's e2e speed-up CI bounds and a plain 2,000-resample
    percentile bootstrap of the same pairs (within prompts)."""
    from workbench.analysis.run import analyze_run

    store = Store(db, create=False)
    analysis = analyze_run(store.load_run(run_id))
    (b,) = [s for s in analysis.summaries if s.variant == "B"]
    rows = store.trials(run_id)
    store.close()
    ref = {(t.prompt_id, t.repetition): t.e2e_ms for t in rows if t.variant == "A"}
    groups: dict[str, list[float]] = {}
    for t in rows:
        if t.variant == "B":
            groups.setdefault(t.prompt_id, []).append(np.log(ref[(t.prompt_id, t.repetition)] / t.e2e_ms))
    rng = np.random.default_rng(0)
    n = sum(len(g) for g in groups.values())
    total = np.zeros(2000)
    for g in groups.values():
        arr = np.asarray(g)
        total += arr[rng.integers(0, arr.size, size=(2000, arr.size))].sum(axis=1)
    lo, hi = np.exp(np.percentile(total / n, [2.5, 97.5]))
    est = b.speedup_e2e
    return max(abs(est.lo / lo - 1), abs(est.hi / hi - 1))


def main() -> int:
    parser = harness.parser(__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--repetitions", type=int, default=100)
    parser.add_argument("--small", type=int, default=20, help="repetitions of the smaller run (default 20)")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--limit-s", type=float, default=2.0, help="show's budget at the large run")
    parser.add_argument("--keep", type=Path, help="keep the databases in this folder")
    args = parser.parse_args()
    print(host_line(), flush=True)
    folder = args.keep or Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for reps in (args.small, args.repetitions):
        db = folder / f"scale-{args.prompts}x{reps}.db"
        if not db.exists():
            t0 = time.perf_counter()
            build(db, args.prompts, reps, args.tokens)
            print(
                f"built {db} ({2 * args.prompts * reps} trials) in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        base = ["--db", str(db)]
        row = {
            "trials": 2 * args.prompts * reps,
            "db MB": db.stat().st_size / 2**20,
            "show s": timed(["show", "1", *base]),
            "show --json s": timed(["show", "1", "--json", *base]),
            "compare s": timed(["compare", "1", *base]),
            "export csv,md s": timed(
                ["export", "1", "--format", "csv,md", "--out", str(folder / "out"), *base]
            ),
            "gui load s": gui_load_s(db, 1),
            "CI vs bootstrap": bootstrap_check(db, 1),
        }
        results[reps] = row
        print(json.dumps(row), flush=True)
    print()
    headers = list(next(iter(results.values())))
    print("  ".join(f"{h:>15}" for h in headers))
    for row in results.values():
        print("  ".join(f"{v:>15.3f}" if isinstance(v, float) else f"{v:>15}" for v in row.values()))
    big, small = results[args.repetitions], results[args.small]
    growth = big["show s"] / small["show s"]
    problems = []
    if big["show s"] > args.limit_s:
        problems.append(
            f"show took {big['show s']:.2f} s at {big['trials']} trials (budget {args.limit_s} s)"
        )
    if growth > 0.8 * args.repetitions / args.small:
        problems.append(f"show grew {growth:.2f}x for {args.repetitions / args.small:.0f}x the trials")
    for row in results.values():
        if row["CI vs bootstrap"] > 0.005:
            problems.append(f"CI bounds differ from the plain bootstrap by {row['CI vs bootstrap']:.2%}")
    print(f"\nshow grew {growth:.2f}x for {args.repetitions / args.small:.0f}x the trials")
    print(host_line())
    return verdict(problems, inline=True)


if __name__ == "__main__":
    sys.exit(main())
