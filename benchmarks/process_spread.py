"""The process-to-process spread, measured directly: N fresh processes of one variant, the same trial.

What is measured
    ``--processes`` worker processes of the demo model's baseline (``demo:smollm2-135m``, float32,
    CPU, ``--threads`` torch threads) are started and loaded at once, then run the *same* trial (the
    built-in ``code`` workload's first prompt, ``--tokens`` new tokens, ``ignore_eos``) in rounds:
    every round runs each process once, in a shuffled order, so whatever the machine does over the
    minutes lands on all of them alike. Each process first runs ``--warmups`` warm-up trials of 8
    tokens (as the workbench's workers do) and then ``--trials`` measured ones. Per trial: the CPU
    time per token (``time.process_time``, every thread of the process), the main thread's CPU time
    per token (``time.thread_time``), the wall time per token (e2e / tokens) and the time the
    process's threads waited for a CPU (``/proc/<pid>/task/*/schedstat``).

    The spread: on the log of each figure, a one-way random-effects split (processes as groups) into
    what varies within a process (``sd within``) and between processes beyond that (``tau``, method
    of moments; 0 when the processes agree as well as their own trials do), the F statistic (between-process
    over within-process mean square; about 1 when the processes do not differ, F(k-1, n-k)'s 95th
    percentile is about 2 for 10 processes × 8 trials), and the slowest process's geometric mean over the fastest's. ``tau`` is
    what the paired statistics' clustering pays for: it is the process effect.

    ``--start``: how a process comes to be:
      ``spawn``  a fresh ``python`` that imports torch and loads the model (the workbench's workers
                 before fork servers);
      ``fork``   this script loads the model once (torch at one thread: no OpenMP team exists yet)
                 and forks every process from it; each child then sets ``--threads``: the weights are
                 the same physical pages in every child;
      ``fork-warm`` as ``fork``, but this script runs a 2-thread trial before forking (the OpenMP
                 team started before the fork: checks that the children still run, and how fast).
    ``--env KEY=VALUE`` (repeatable) sets a variable for the processes (``spawn``: their
    environment; ``fork``: this script's, before torch is imported): e.g.
    ``THP_MEM_ALLOC_ENABLE=1`` (torch's allocator asks for huge pages), ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP threads sleep
    at a barrier instead of spinning), ``OMP_PROC_BIND=true`` (OpenMP threads pinned).
    ``--env-b KEY=VALUE`` (repeatable, spawn): every other process gets it too, so two settings run
    side by side in one run (the machine's drift lands on both); each group's split is printed, and
    B's geometric mean over A's.
    ``--contend S``: a CPU-burning process on one core for S seconds after the first measured round
    (the "after contention" case).

    The warm-up figure: per measured trial position k = 1, 2, 3 the geometric mean over processes of
    (trial k / the process's trials from k = 4 on). All processes are at the same k in a round, so a
    machine that drifts shows here too; ``--warmup-study`` measures it without that: one steady
    reference process (3 trials run) and ``--processes`` fresh ones started one at a time, each
    running ``--warmups`` warm-ups and then ``--trials`` trials, each beside one of the reference's
    (alternating which goes first): fresh / reference per position k, the geometric mean over the
    fresh processes (± its standard error). How many warm-ups a fresh worker needs is where that
    reaches 1.00.

Pass criterion
    none: a measurement. It prints the table, the load average before and after, and the per-process
    figures; ``--json PATH`` writes every trial.

    python benchmarks/process_spread.py --start spawn --processes 10
    python benchmarks/process_spread.py --start fork --processes 10
    python benchmarks/process_spread.py --env-b OMP_WAIT_POLICY=PASSIVE    # two settings side by side
    python benchmarks/process_spread.py --warmup-study --processes 6 --trials 4 --warmups 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness

SPEC = """
name = "process spread"
repetitions = 1
warmup = 1
warmup_max_new_tokens = 8
[[variants]]
name = "A"
model = "demo:smollm2-135m"
dtype = "float32"
threads = {threads}
[[workloads]]
name = "code"
limit = 1
max_new_tokens = {tokens}
ignore_eos = true
"""

HOG = "import time\nt = time.time()\nwhile time.time() - t < {s}:\n    pass\n"


def _plans(threads: int, tokens: int) -> tuple[Any, Any, Any]:
    from workbench.run.plan import plan_run
    from workbench.spec.parse import parse_spec

    (plan,) = plan_run(parse_spec(SPEC.format(threads=threads, tokens=tokens)))
    warm = next(t for t in plan.trials if t.warmup)
    measured = next(t for t in plan.trials if not t.warmup)
    return plan.variant, warm, measured


def _load(variant: Any) -> Any:
    import torch

    from workbench.core import registry
    from workbench.core.device import resolve_device
    from workbench.run.runner import TrialRunner

    torch.set_num_threads(variant.threads)  # as the workbench's worker does (run.worker)
    strategy = registry.get(variant.strategy)()
    device = resolve_device(variant.device, needs_torch=True)
    return TrialRunner(strategy.load(variant, device), device)


def _serve(runner: Any, warm: Any, measured: Any, rfile: Any, wfile: Any) -> None:
    """Answer each command line with one trial's figures (a JSON line)."""
    from workbench.run.disturbance import MachineWatch

    watch = MachineWatch()
    for line in rfile:
        command = json.loads(line)
        if command.get("close"):
            return
        plan = warm if command.get("warmup") else measured
        mark = watch.mark()
        thread0 = time.thread_time()
        result = runner.run(plan)
        thread_ms = (time.thread_time() - thread0) * 1000
        figures = watch.figures(mark)
        record = result.record
        tokens = record.output_tokens or 0
        backing = weights_backing()
        wfile.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "status": result.status,
                    "tokens": tokens,
                    "e2e_ms": record.e2e_ms,
                    "ttft_ms": record.ttft_ms,
                    "cpu_ms": figures["cpu_ms"],
                    "thread_ms": thread_ms,
                    "wait_ms": figures["cpu_wait_ms"],
                    "anon_huge_mb": backing.get("AnonHugePages", 0) / 1024,
                    "file_pmd_mb": backing.get("FilePmdMapped", 0) / 1024,
                }
            )
            + "\n"
        )
        wfile.flush()


def weights_backing() -> dict[str, int]:
    """This process's memory as ``/proc/self/smaps`` counts it (kB): anonymous huge pages and file
    pages mapped 2 MB at once (the safetensors weights are a file mapping: transformers leaves them in
    the page cache when the stored dtype is the one asked for)."""
    totals = {"AnonHugePages": 0, "FilePmdMapped": 0}
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in totals:
                    totals[key] += int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return totals


def child_main(config: dict[str, Any]) -> int:
    """``--child``: a spawned process: load, then serve trials on stdin/stdout."""
    events = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    variant, warm, measured = _plans(config["threads"], config["tokens"])
    runner = _load(variant)
    events.write(json.dumps({"loaded": os.getpid()}) + "\n")
    events.flush()
    _serve(runner, warm, measured, sys.stdin, events)
    return 0


class Proc:
    """One measured process: ``ask`` runs a trial and returns its figures."""

    def __init__(self, rfile: Any, wfile: Any, popen: Any = None, pid: int | None = None) -> None:
        self.rfile, self.wfile, self.popen, self.pid = rfile, wfile, popen, pid
        self.rows: list[dict[str, Any]] = []

    def ask(self, warmup: bool) -> dict[str, Any]:
        self.wfile.write(json.dumps({"warmup": warmup}) + "\n")
        self.wfile.flush()
        line = self.rfile.readline()
        if not line:
            raise RuntimeError("a measured process died")
        return dict(json.loads(line))

    def close(self) -> None:
        try:
            self.wfile.write(json.dumps({"close": True}) + "\n")
            self.wfile.flush()
            self.wfile.close()
        except OSError:
            pass
        if self.popen is not None:
            self.popen.wait(timeout=60)
        elif self.pid is not None:
            os.waitpid(self.pid, 0)


def start_spawned(
    n: int, config: dict[str, Any], env: dict[str, str], env_b: dict[str, str] | None = None
) -> list[Proc]:
    """``n`` spawned processes; with ``env_b``, every other one (1, 3, 5 …) gets it on top of ``env``."""
    procs = []
    for i in range(n):
        popen = subprocess.Popen(
            [sys.executable, __file__, "--child", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, **env, **(env_b or {} if i % 2 else {})},
        )
        procs.append(Proc(popen.stdout, popen.stdin, popen=popen))
    for p in procs:  # wait for every load (they load side by side)
        line = p.rfile.readline()
        if not line:
            raise RuntimeError("a spawned process could not load")
    return procs


def start_forked(n: int, config: dict[str, Any], warm_first: bool) -> list[Proc]:
    import torch

    variant, warm, measured = _plans(config["threads"], config["tokens"])
    runner = _load(dataclasses.replace(variant, threads=1))  # no OpenMP team before the fork

    if warm_first:
        torch.set_num_threads(config["threads"])
        runner.run(warm)
    procs = []
    for _ in range(n):
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.close(down_w)
                os.close(up_r)
                for p in procs:  # the earlier children's pipes are not ours
                    p.rfile.close()
                    p.wfile.close()
                torch.set_num_threads(config["threads"])
                _serve(runner, warm, measured, os.fdopen(down_r), os.fdopen(up_w, "w"))
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        procs.append(Proc(os.fdopen(up_r), os.fdopen(down_w, "w"), pid=pid))
    return procs


def split(groups: list[list[float]]) -> dict[str, float]:
    """One-way random effects on the logs: sd within, tau between, F, max/min of the means."""
    import numpy as np

    logs = [np.log(np.asarray(g, dtype=float)) for g in groups if len(g) >= 2]
    k = len(logs)
    n = sum(g.size for g in logs)
    grand = float(np.concatenate(logs).mean())
    means = [float(g.mean()) for g in logs]
    ss_w = sum(float(((g - g.mean()) ** 2).sum()) for g in logs)
    ss_b = sum(g.size * (m - grand) ** 2 for g, m in zip(logs, means, strict=True))
    ms_w, ms_b = ss_w / (n - k), ss_b / (k - 1)
    n0 = (n - sum(g.size**2 for g in logs) / n) / (k - 1)
    tau2 = max(0.0, (ms_b - ms_w) / n0)
    f = ms_b / ms_w if ms_w > 0 else math.inf
    return {
        "sd_within": math.sqrt(ms_w),
        "tau": math.sqrt(tau2),
        "F": f,
        "max_over_min": math.exp(max(means) - min(means)),
    }


def warmup_study(args: Any, config: dict[str, Any], env: dict[str, str]) -> int:
    """A steady reference process against ``--processes`` fresh ones, one at a time: each fresh
    process runs ``--warmups`` warm-ups, then ``--trials`` measured trials, each right beside one of
    the reference's (alternating which goes first), so that the machine's drift cancels in the
    ratio fresh / reference per trial position k."""
    load0 = os.getloadavg()[0]
    (reference,) = start_spawned(1, config, env)
    for _ in range(3):  # the reference is steady: warmed up well past any first-trial effect
        reference.ask(warmup=False)
    ratios: dict[str, list[list[float]]] = {"cpu/token": [], "wall/token": []}
    for f in range(args.processes):
        (fresh,) = start_spawned(1, config, env)
        for _ in range(args.warmups):
            fresh.ask(warmup=True)
        cpu, wall = [], []
        for k in range(args.trials):
            pair = (reference, fresh) if (f + k) % 2 else (fresh, reference)
            rows = {id(p): p.ask(warmup=False) for p in pair}
            r, x = rows[id(reference)], rows[id(fresh)]
            cpu.append((x["cpu_ms"] / x["tokens"]) / (r["cpu_ms"] / r["tokens"]))
            wall.append((x["e2e_ms"] / x["tokens"]) / (r["e2e_ms"] / r["tokens"]))
        fresh.close()
        ratios["cpu/token"].append(cpu)
        ratios["wall/token"].append(wall)
        print(
            f"fresh process {f}: cpu/token over the reference's by trial: "
            + " ".join(f"{v:.3f}" for v in cpu)
        )
    reference.close()
    print(
        f"warm-up study: {args.processes} fresh processes x {args.warmups} warm-ups x {args.trials} trials, "
        f"threads={args.threads}, tokens={args.tokens}, env={env or '-'}  load {load0:.2f} -> "
        f"{os.getloadavg()[0]:.2f}"
    )
    for name, table in ratios.items():
        cells = []
        for k in range(args.trials):
            logs = [math.log(row[k]) for row in table]
            sd = statistics.stdev(logs) if len(logs) > 1 else 0.0
            cells.append(
                f"k={k + 1}: {math.exp(statistics.fmean(logs)):.3f} (±{sd / math.sqrt(len(logs)):.3f})"
            )
        print(f"{name:<11} fresh / reference: " + "  ".join(cells))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "ratios": ratios}, indent=1, default=str))
    return 0


def parse_args() -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = harness.parser(__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--start", choices=("spawn", "fork", "fork-warm"), default="spawn")
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--trials", type=int, default=8, help="measured trials per process (default 8)")
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the processes")
    parser.add_argument(
        "--env-b",
        action="append",
        default=[],
        help="KEY=VALUE for every other process only (spawn): two settings side by side in one run",
    )
    parser.add_argument("--contend", type=float, default=0.0, help="a CPU hog for S s after round 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--warmup-study",
        action="store_true",
        help="instead: how many trials a fresh process needs (see the module docstring)",
    )
    return parser.parse_args(), parser


def run_rounds(args: argparse.Namespace, procs: list[Any]) -> None:
    """The warm-ups, then ``--trials`` rounds of one trial in every process, in a shuffled order each
    round (the rows go to each process's ``rows``); ``--contend``: a CPU hog after the first round."""
    rng = random.Random(args.seed)
    for _ in range(args.warmups):
        for p in procs:
            p.ask(warmup=True)
    hog = None
    for r in range(args.trials):
        order = list(procs)
        rng.shuffle(order)
        for p in order:
            row = p.ask(warmup=False)
            row["round"] = r
            p.rows.append(row)
        if r == 0 and args.contend:
            hog = subprocess.Popen([sys.executable, "-c", HOG.format(s=args.contend)])
    if hog is not None:
        hog.wait()
    for p in procs:
        p.close()


#: the figures split into within-process noise and the process effect: name -> a trial row's value
FIGURES: dict[str, Callable[[dict[str, Any]], float]] = {
    "cpu/token": lambda row: row["cpu_ms"] / row["tokens"],
    "thread/token": lambda row: row["thread_ms"] / row["tokens"],
    "wall/token": lambda row: row["e2e_ms"] / row["tokens"],
}


def print_figures(ok: list[list[dict[str, Any]]], env_b: dict[str, str], out: dict[str, Any]) -> None:
    """Each figure's median and split (and with ``--env-b``, each setting's and B over A), into ``out``."""
    print(f"{'figure':<14}{'median ms':>10}{'sd within':>11}{'tau':>8}{'F':>9}{'max/min':>9}")
    for name, fn in FIGURES.items():
        groups = [[fn(row) for row in rows] for rows in ok]
        s = split(groups)
        median = statistics.median(v for g in groups for v in g)
        print(
            f"{name:<14}{median:>10.2f}{s['sd_within']:>10.1%}{s['tau']:>8.1%}{s['F']:>9.2f}"
            f"{s['max_over_min']:>9.3f}"
        )
        out["figures"][name] = {"median_ms": median, **s}
    if env_b:  # the two settings side by side: each group's own split, and B's processes over A's
        for name, fn in FIGURES.items():
            groups = [[fn(row) for row in rows] for rows in ok]
            a, b = groups[0::2], groups[1::2]
            sa, sb = split(a), split(b)
            ga = statistics.geometric_mean([v for g in a for v in g])
            gb = statistics.geometric_mean([v for g in b for v in g])
            print(
                f"{name:<14} A: {ga:.2f} ms sd {sa['sd_within']:.1%} tau {sa['tau']:.1%} | B {env_b}: {gb:.2f} ms "
                f"sd {sb['sd_within']:.1%} tau {sb['tau']:.1%} | B/A {gb / ga:.3f}"
            )
            out["figures"][name]["a"], out["figures"][name]["b"] = sa, sb
            out["figures"][name]["b_over_a"] = gb / ga


def print_processes(ok: list[list[dict[str, Any]]]) -> None:
    """Each process's CPU ms per token, its share of waiting for a CPU and its memory on huge pages."""
    per = []
    for i, rows in enumerate(ok):
        cpu = [r["cpu_ms"] / r["tokens"] for r in rows]
        wait = sum(r["wait_ms"] or 0 for r in rows) / max(1e-9, sum(r["cpu_ms"] for r in rows))
        huge = rows[-1]["anon_huge_mb"] + rows[-1]["file_pmd_mb"] if rows else 0
        per.append(f"{i}:{statistics.geometric_mean(cpu):.2f}ms(w{wait:.0%},{huge:.0f}MB huge)")
    print("cpu ms/token by process (wait share, MB on huge pages):", " ".join(per))


def print_warmup(ok: list[list[dict[str, Any]]], trials: int, out: dict[str, Any]) -> None:
    """Each of the first measured trials over the same process's steady ones (cpu/token), into ``out``."""
    steady_from = 3
    if trials > steady_from + 1:
        ratios = []
        for k in range(steady_from):
            logs = []
            for rows in ok:
                rest = [r["cpu_ms"] / r["tokens"] for r in rows[steady_from:]]
                if len(rows) > k and rest:
                    logs.append(math.log(rows[k]["cpu_ms"] / rows[k]["tokens"] / statistics.median(rest)))
            ratios.append(math.exp(statistics.fmean(logs)) if logs else float("nan"))
        print(
            "warm-up: measured trial k / the same process's trials from k = 4 on (cpu/token): "
            + " ".join(f"k={k + 1}: {v:.3f}" for k, v in enumerate(ratios))
        )
        out["warmup_ratios"] = ratios


def main() -> int:
    args, parser = parse_args()
    if args.child is not None:
        return child_main(json.loads(args.child))
    env = dict(item.split("=", 1) for item in args.env)
    config = {"threads": args.threads, "tokens": args.tokens}
    if args.warmup_study:
        return warmup_study(args, config, env)
    load0 = os.getloadavg()
    t0 = time.time()
    env_b = dict(item.split("=", 1) for item in args.env_b)
    if env_b and args.start != "spawn":
        parser.error("--env-b needs --start spawn")
    if args.start == "spawn":
        procs = start_spawned(args.processes, config, env, env_b)
    else:
        os.environ.update(env)
        procs = start_forked(args.processes, config, warm_first=args.start == "fork-warm")
    started = time.time() - t0
    run_rounds(args, procs)
    load1 = os.getloadavg()
    ok = [[row for row in p.rows if row["status"] == "ok" and row["tokens"]] for p in procs]
    print(
        f"start={args.start} env={env or '-'} processes={args.processes} threads={args.threads} "
        f"trials={args.trials} tokens={args.tokens} contend={args.contend:g}s  started in {started:.1f} s, "
        f"ran {time.time() - t0:.0f} s  load {load0[0]:.2f} -> {load1[0]:.2f}"
    )
    out: dict[str, Any] = {"args": vars(args), "load": [load0[0], load1[0]], "figures": {}}
    print_figures(ok, env_b, out)
    print_processes(ok)
    print_warmup(ok, args.trials, out)
    if args.json:
        out["trials"] = [rows for rows in ok]
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
