"""Can a worker be forked from a process that has loaded a runtime? (what a fork server would need)

What is measured
    For each runtime on the demo model — ``baseline`` (torch, OpenMP), ``onnxruntime-genai`` (int8),
    ``llama-cpp`` (the shipped Q4_1) — this script loads the variant through its strategy, in two
    cases: ``cold`` (loaded, nothing run: the runtime's thread pools as the load left them) and
    ``warm`` (one trial run first: every thread pool started); for torch also ``cold-1`` (loaded
    with one thread: no OpenMP team exists at the fork; the child sets ``--threads``). Then it forks a child that runs one
    trial of ``--tokens`` tokens with ``--threads`` threads under a ``--timeout`` alarm, and reports
    what happened (``ok`` with the child's decode ms/token beside the parent's own, ``hung``: killed
    at the timeout, ``crashed``: the signal or exit code) and whether the output equals the parent's.
    A runtime that is not installed is left out with a line saying so.

Pass criterion
    none: the table says where a fork is safe (``ok`` and the same output) and where a fresh process
    has to be spawned.

    python benchmarks/fork_safety.py
    python benchmarks/fork_safety.py --runtimes baseline --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

SPEC = """
name = "fork safety"
repetitions = 1
warmup = 0
[[variants]]
name = "v"
model = "demo:smollm2-135m"
threads = {threads}
{extra}
[[workloads]]
name = "code"
limit = 1
max_new_tokens = {tokens}
ignore_eos = true
"""

RUNTIMES = {
    "baseline": 'dtype = "float32"',
    "onnxruntime-genai": 'strategy = "onnxruntime-genai"\nprecision = "int8"',
    "llama-cpp": 'strategy = "llama-cpp"',
}


def trial(runner: Any, plan: Any) -> dict[str, Any]:
    result = runner.run(plan)
    r = result.record
    decode = r.tpot_ms
    return {"status": result.status, "tpot_ms": decode, "tokens": r.output_token_ids, "error": r.error}


def check(runtime: str, case: str, args: Any) -> dict[str, Any]:
    """Load in a child of this script (so each case starts clean), maybe run a trial, fork, run one."""
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        with os.fdopen(read) as f:
            text = f.read()
        os.waitpid(pid, 0)
        return json.loads(text) if text else {"runtime": runtime, "case": case, "result": "the loader died"}
    os.close(read)
    out: dict[str, Any] = {"runtime": runtime, "case": case}
    try:
        from workbench.core import registry
        from workbench.core.device import resolve_device
        from workbench.run.plan import plan_run
        from workbench.run.runner import TrialRunner
        from workbench.spec.parse import parse_spec

        spec = parse_spec(SPEC.format(threads=args.threads, tokens=args.tokens, extra=RUNTIMES[runtime]))
        (plan,) = plan_run(spec)
        variant = plan.variant
        strategy = registry.get(variant.strategy_ref or variant.strategy)()
        reason = strategy.available()
        if reason:
            out["result"] = f"not installed: {reason}"
            raise SystemExit
        load_threads = 1 if case == "cold-1" else args.threads
        os.environ["OMP_NUM_THREADS"] = str(load_threads)
        try:
            import torch

            torch.set_num_threads(load_threads)
        except ImportError:
            torch = None
        device = resolve_device(variant.device, needs_torch=strategy.requires_model)
        runner = TrialRunner(strategy.load(variant, device), device)
        measured = plan.trials[0]
        mine = trial(runner, measured) if case == "warm" else None
        down_r, down_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(down_r)
            signal.alarm(args.timeout)
            code = 0
            if torch is not None:
                torch.set_num_threads(args.threads)
            try:
                got = trial(runner, measured)
                os.write(down_w, json.dumps(got).encode())
            except BaseException as exc:
                os.write(down_w, json.dumps({"status": "error", "error": repr(exc)}).encode())
                code = 1
            finally:
                os._exit(code)
        os.close(down_w)
        t0 = time.monotonic()
        with os.fdopen(down_r) as f:
            text = f.read()
        _, status = os.waitpid(child, 0)
        seconds = time.monotonic() - t0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            out["result"] = "hung" if sig == signal.SIGALRM else f"crashed ({signal.Signals(sig).name})"
        elif not text:
            out["result"] = f"crashed (exit {os.WEXITSTATUS(status)})"
        else:
            got = json.loads(text)
            if mine is None:
                if torch is not None:
                    torch.set_num_threads(args.threads)
                mine = trial(runner, measured)  # the parent's own, for comparison
            same = got.get("tokens") == mine.get("tokens")
            out["result"] = (
                f"{got['status']} in {seconds:.1f} s: child {got['tpot_ms']:.1f} ms/token, parent "
                f"{mine['tpot_ms']:.1f}; output {'the same' if same else 'DIFFERENT'}"
                if got["status"] == "ok"
                else f"{got['status']}: {got.get('error')}"
            )
    except SystemExit:
        pass
    except BaseException as exc:
        out["result"] = f"could not load: {exc!r}"[:300]
    os.write(write, json.dumps(out).encode())
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument(
        "--timeout", type=int, default=120, help="seconds before a forked child counts as hung"
    )
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, threads {args.threads}", flush=True)
    for runtime in [r.strip() for r in args.runtimes.split(",") if r.strip()]:
        if runtime not in RUNTIMES:
            parser.error(f"unknown runtime {runtime!r}; choose from {', '.join(RUNTIMES)}")
        for case in ("cold", "cold-1", "warm") if runtime == "baseline" else ("cold", "warm"):
            row = check(runtime, case, args)
            print(f"{row['runtime']:<18} {row['case']:<5} {row.get('result')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
