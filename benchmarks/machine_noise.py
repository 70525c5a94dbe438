"""Where the trial-to-trial noise comes from: the machine's own speed, probed beside the model.

What is measured
    One process loads the demo model's baseline (``demo:smollm2-135m``, float32, CPU) and runs the
    built-in ``code`` workload's first prompt (``--tokens`` new tokens, ``ignore_eos``) again and
    again, in pairs of two back-to-back trials at the same thread count: pairs at 2 threads and at
    1 thread alternate (2, 2, 1, 1, 2, 2, ...), ``--pairs`` of each. Around every trial a **probe**
    of fixed work runs for ``--probe-ms`` (a pure-Python loop on one thread: no memory traffic, no
    other thread, nothing the model can leave behind but the machine's state): its speed before and
    after the trial says how fast the machine ran then. Per trial: e2e, the process's CPU time, the
    time its threads waited for a CPU (``schedstat``: another program of this machine holding a core)
    and the machine's steal time (``/proc/stat``: a hypervisor running someone else on our vCPU).

    Printed per thread count:

    - ``pair sd``: the spread of log(trial 2 / trial 1) within the pairs — what an A/A pair of
      identical trials seconds apart differs by, with one process and no process effect at all;
    - ``probe ~ trial``: the correlation of a trial's log e2e (relative to the median) with the log
      of its probes' mean time (relative to theirs): high when the trial was slow because the whole
      machine was slow;
    - ``pair sd | probe``: the pairs' spread left once the probes' difference is regressed out — what a
      probe-adjusted comparison would be left with;
    - the share of the trial time the threads waited for a CPU and the steal share: when both are
      near zero while the trials still differ by several per cent, the cause is not another program
      of this machine but the host under it (other virtual machines sharing its cores, caches and
      memory bandwidth), outside anything a process here controls;
    - the probe's own spread over 1-s windows of ``--probe-only-s`` seconds run alone at the start.

Pass criterion
    none: a measurement (docs/analysis.md "Where the noise comes from" quotes it).

    python benchmarks/machine_noise.py                    # 12 pairs at each thread count, ~3 min
    python benchmarks/machine_noise.py --pairs 20 --tokens 32
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SPEC = """
name = "machine noise"
repetitions = 1
warmup = 1
warmup_max_new_tokens = 8
[[variants]]
name = "A"
model = "demo:smollm2-135m"
dtype = "float32"
[[workloads]]
name = "code"
limit = 1
max_new_tokens = {tokens}
ignore_eos = true
"""


def steal_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of the whole machine from ``/proc/stat``."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def probe(ms: float) -> float:
    """Run fixed work for about ``ms`` and return the microseconds one unit of it took (the median
    unit: a unit is 2,000 iterations of an integer loop)."""
    units = []
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        x = 0
        for i in range(2000):
            x += i * i
        units.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(units)


def corr(x: list[float], y: list[float]) -> float:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def residual_sd(y: list[float], x: list[float]) -> float:
    """The spread of ``y`` left after a least-squares line on ``x`` (n − 2 degrees of freedom)."""
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    beta = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx if sxx > 0 else 0.0
    res = [b - my - beta * (a - mx) for a, b in zip(x, y, strict=True)]
    return math.sqrt(sum(r * r for r in res) / max(1, len(res) - 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12, help="pairs of trials per thread count (12)")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--probe-ms", type=float, default=150.0)
    parser.add_argument("--probe-only-s", type=float, default=20.0)
    parser.add_argument("--threads", default="2,1", help="thread counts whose pairs alternate (2,1)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    import torch

    from workbench.core import registry
    from workbench.core.device import resolve_device
    from workbench.run.disturbance import MachineWatch
    from workbench.run.plan import plan_run
    from workbench.run.runner import TrialRunner
    from workbench.spec.parse import parse_spec

    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    # the probe alone first: the machine's speed over 1-s windows with nothing else running here
    windows = []
    s0 = steal_ticks()
    for _ in range(int(args.probe_only_s)):
        windows.append(probe(1000))
    s1 = steal_ticks()
    med = statistics.median(windows)
    rel = [math.log(w / med) for w in windows]
    adjacent = [b - a for a, b in zip(rel[::2], rel[1::2], strict=False)]
    print(
        f"probe alone, {len(windows)} 1-s windows: unit {med:.1f} us median, spread {statistics.stdev(rel):.1%}, "
        f"slowest {math.exp(max(rel)):.2f}x the median, adjacent windows differ by {statistics.stdev(adjacent):.1%} "
        f"(sd); steal {(s1[0] - s0[0]) / max(1, s1[1] - s0[1]):.1%}",
        flush=True,
    )

    (plan,) = plan_run(parse_spec(SPEC.format(tokens=args.tokens)))
    warm = next(t for t in plan.trials if t.warmup)
    measured = next(t for t in plan.trials if not t.warmup)
    variant = plan.variant
    strategy = registry.get(variant.strategy)()
    device = resolve_device(variant.device, needs_torch=True)
    runner = TrialRunner(strategy.load(variant, device), device)
    watch = MachineWatch()
    counts = [int(x) for x in args.threads.split(",") if x.strip()]
    for n in counts:
        torch.set_num_threads(n)
        runner.run(warm)
        runner.run(measured)
    rows: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    for i in range(args.pairs):
        for n in counts:
            torch.set_num_threads(n)
            for _ in range(2):
                before = probe(args.probe_ms)
                st0 = steal_ticks()
                mark = watch.mark()
                result = runner.run(measured)
                figures = watch.figures(mark)
                st1 = steal_ticks()
                after = probe(args.probe_ms)
                rows[n].append(
                    {
                        "e2e": result.record.e2e_ms,
                        "cpu": figures["cpu_ms"],
                        "wait": figures["cpu_wait_ms"] or 0.0,
                        "steal": (st1[0] - st0[0]) / max(1, st1[1] - st0[1]),
                        "probe": math.sqrt(before * after),
                    }
                )
        print(f"pair {i + 1}/{args.pairs} done (load {os.getloadavg()[0]:.2f})", flush=True)
    print()
    print(
        f"{'threads':>7} {'e2e ms':>8} {'pair sd':>8} {'probe~trial':>11} {'pair sd|probe':>13} "
        f"{'wait':>6} {'steal':>6} {'cpu/e2e':>7}"
    )
    for n in counts:
        r = rows[n]
        e2e_med = statistics.median(x["e2e"] for x in r)
        probe_med = statistics.median(x["probe"] for x in r)
        le = [math.log(x["e2e"] / e2e_med) for x in r]
        lp = [math.log(x["probe"] / probe_med) for x in r]
        d = [b - a for a, b in zip(le[::2], le[1::2], strict=True)]
        dp = [b - a for a, b in zip(lp[::2], lp[1::2], strict=True)]
        wait = sum(x["wait"] for x in r) / sum(x["cpu"] for x in r)
        steal = statistics.fmean(x["steal"] for x in r)
        cpu = statistics.fmean(x["cpu"] / x["e2e"] for x in r)
        print(
            f"{n:>7} {e2e_med:>8.0f} {statistics.stdev(d):>8.1%} {corr(le, lp):>11.2f} "
            f"{residual_sd(d, dp):>13.1%} {wait:>6.1%} {steal:>6.1%} {cpu:>7.2f}"
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
