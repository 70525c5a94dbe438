"""Runner overhead on the real demo model: does measuring through the workbench slow decoding down?

What is measured
    Decode throughput of greedy decoding on ``demo:smollm2-135m`` (float32, CPU by default), the same
    fixed prompt and exactly N new tokens, two ways:

    runner    the ``baseline`` strategy through the real path: a one-variant spec run by
              ``RunExecutor`` (a fresh ``python -m workbench.run.worker`` process that loads the model,
              runs one warm-up trial, then the measured trials; the prompt comes from a small JSONL
              workload written to a temp dir, ``ignore_eos = true``). Figures are the stored
              trials' ``decode_tokens_per_s`` = (N - 1) / (last step - first step).
    generate  a bare ``model.generate(input_ids, attention_mask=..., max_new_tokens=N,
              do_sample=False, streamer=...)`` in this process on the same model
              (loaded the same way, ``workbench_strategies._hf.load_hf_model``) and the same token ids. A
              streamer whose ``put()`` takes ``time.perf_counter()`` per token gives the same
              figure: (N - 1) / (last token time - first token time). TTFT = call -> first token.

    The two methods alternate (runner, generate, generate, runner, ...) for ``--repetitions``
    rounds of ``--trials-per-round`` measured trials each, so slow drift of the machine hits both
    alike; the medians over all measured trials are compared, with a bootstrap 95 % interval.
    Both processes use torch's default thread count (set OMP_NUM_THREADS in the environment to pin
    both alike; the worker inherits it); the thread count each side saw is printed and must agree.
    The CPU time other processes used during each round is shown (from /proc/stat); above 10 % the
    result is flagged untrustworthy.

    Decomposition (diagnostic, not a criterion): in this process, the real ``TrialRunner`` with the
    baseline session and ``generate`` alternate again with ``model.forward`` wrapped by a timer;
    per decode step, the time inside forward and the host time outside it (sampling, ``.item()``,
    the probe, generate's bookkeeping) are printed. Forward time drifts with the machine, the
    host time does not, so this resolves differences the end-to-end throughput cannot on a noisy
    machine. By default generate gets no ``min_new_tokens``: its EOS-masking logits processors cost
    ~2 ms per step on CPU and would favour the runner by ~2 % (``--min-new-tokens`` turns them on);
    the default prompt does not reach EOS, and the output length is checked either way.

Pass criterion (exit 0; exit 1 otherwise)
    ratio = median runner decode tok/s / median generate decode tok/s >= 0.98 (``--min-ratio``),
    every trial ok with exactly N tokens, equal torch thread counts. Token identity of the two
    outputs is reported (not a criterion).

Defaults take ~4 minutes on a 2-core CPU (~100 ms per token in float32). The numbers are only
meaningful on an otherwise idle machine; trial-to-trial noise of a shared VM can exceed the 2 %
margin (the bootstrap interval says when the verdict is inconclusive).

    python benchmarks/overhead.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness import DEMO_MODEL, add_repetitions, verdict

#: a list continuation: the demo model does not emit EOS within 128 greedy tokens (checked), so the
#: runner (ignore_eos: continues past an EOS) and generate (min_new_tokens: forbids EOS) agree token
#: for token and the identity check is meaningful
DEFAULT_PROMPT = (
    "Here is a long list of the countries of the world in alphabetical order:\n1. Afghanistan\n2. Albania\n3."
)
MODEL = DEMO_MODEL


def loadavg() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


class ForeignCpu:
    """CPU time used by *other* processes (Linux ``/proc/stat`` minus this process and its waited-for
    children), as a fraction of the machine's capacity: a noise indicator for the measurements."""

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / hz  # all but idle and iowait
        t = os.times()
        return busy, t.user + t.system + t.children_user + t.children_system, time.perf_counter()

    def fraction(self) -> float | None:
        end = self._sample()
        if self._start is None or end is None:
            return None
        busy, own, wall = (b - a for a, b in zip(self._start, end, strict=True))
        return max(0.0, busy - own) / ((os.cpu_count() or 1) * wall) if wall > 0 else None


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


class TimingStreamer:
    """A transformers streamer that only timestamps: ``generate`` calls ``put`` once with the prompt,
    then once per new token (after the token is on the host), then ``end``."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.tokens: list[int] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        t = time.perf_counter()
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(t)
        self.tokens.extend(int(i) for i in value.reshape(-1).tolist())

    def end(self) -> None:
        pass


def build_spec(workload_file: Path, args: argparse.Namespace) -> Any:
    from workbench.spec.parse import parse_spec

    text = f"""
name = "benchmark: runner overhead"
repetitions = {args.trials_per_round}
warmup = {args.warmup}

[[variants]]
name = "baseline"
strategy = "baseline"
model = "{MODEL}"
dtype = "{args.dtype}"
device = "{args.device}"

[[workloads]]
name = "fixed"
file = "{workload_file.name}"
max_new_tokens = {args.max_new_tokens}
ignore_eos = true
"""
    return parse_spec(text, base_dir=workload_file.parent)


def run_runner(spec: Any, db: Path) -> dict[str, Any]:
    """One RunExecutor run (fresh worker process); the measured trials' figures."""
    from workbench.run.execute import RunExecutor
    from workbench.store import Store

    store = Store(db)
    try:
        result = RunExecutor(spec, store).run()
        trials = store.trials(result.run_id)
        env = json.loads(store.resolve_run(result.run_id)["environment"] or "{}")
        gaps: list[float] = []
        for t in trials:
            if t.status == "ok":
                steps = [s["t_ms"] for s in store.steps(t.id)]
                gaps += [b - a for a, b in itertools.pairwise(steps)]
    finally:
        store.close()
    return {
        "status": result.status,
        "errors": result.errors,
        "trials": trials,
        "gaps_ms": gaps,
        "threads": env.get("host", {}).get("torch_threads"),
    }


def run_generate(hf: Any, input_ids: list[int], n: int, min_new_tokens: bool = True) -> dict[str, Any]:
    import torch

    ids = torch.tensor([input_ids], dtype=torch.long, device=hf.torch_device)
    mask = torch.ones_like(ids)
    streamer = TimingStreamer()
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = hf.model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=n,
            min_new_tokens=n if min_new_tokens else None,
            do_sample=False,
            streamer=streamer,
        )
    times = streamer.times
    new_tokens = out[0, len(input_ids) :].tolist()
    decode_s = times[-1] - times[0] if len(times) > 1 else 0.0
    return {
        "output_tokens": len(new_tokens),
        "tokens": new_tokens,
        "ttft_ms": (times[0] - t0) * 1000 if times else None,
        "decode_tokens_per_s": (len(times) - 1) / decode_s if decode_s > 0 else None,
        "gaps_ms": [(b - a) * 1000 for a, b in itertools.pairwise(times)],
    }


def host_profile(
    hf: Any, spec: Any, device: Any, input_ids: list[int], n: int, reps: int, min_new_tokens: bool
) -> dict[str, Any]:
    """In-process decomposition of one decode step: time inside ``model.forward`` vs host time
    outside it (sampling, ``.item()``, the probe / generate's bookkeeping). Uses the real
    ``TrialRunner`` with the baseline session, alternating with ``generate``. Forward time drifts
    with the machine; the host time outside forward is small and stable, so it resolves what the
    end-to-end throughput comparison cannot on a noisy machine."""
    import dataclasses

    from workbench_strategies.baseline import BaselineSession

    from workbench.run.plan import plan_run
    from workbench.run.runner import TrialRunner

    model = hf.model
    forward = model.forward
    calls: list[float] = []

    def timed_forward(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return forward(*a, **k)
        finally:
            calls.append(time.perf_counter() - t)

    plan = dataclasses.replace(plan_run(spec)[0].trials[-1], max_new_tokens=n)
    runner = TrialRunner(BaselineSession(hf), device)
    out: dict[str, list[tuple[float, float]]] = {"runner": [], "generate": []}
    model.forward = timed_forward  # an instance attribute: nn.Module.__call__ looks it up per call
    try:
        for r in range(reps + 1):  # the first round warms up
            for method in ("runner", "generate") if r % 2 == 0 else ("generate", "runner"):
                calls.clear()
                if method == "runner":
                    res = runner.run(plan)
                    decode_s = res.record.decode_ms / 1000
                else:
                    decode_s = (n - 1) / run_generate(hf, input_ids, n, min_new_tokens)["decode_tokens_per_s"]
                # calls[0] is the prefill; the n - 1 decode forwards lie between first and last token
                decode_forward = sum(calls[1:])
                if r > 0 and len(calls) == n:
                    out[method].append(((decode_s - decode_forward) / (n - 1), decode_forward / (n - 1)))
    finally:
        del model.forward
    return {
        k: {
            "host_ms": statistics.median(x[0] for x in v) * 1000,
            "forward_ms": statistics.median(x[1] for x in v) * 1000,
            "n": len(v),
        }
        for k, v in out.items()
        if v
    }


def bootstrap_ratio(a: list[float], b: list[float], iterations: int = 4000) -> tuple[float, float]:
    """95 % bootstrap interval of median(a) / median(b), resampling each side."""
    import random

    rng = random.Random(0)
    ratios = sorted(
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(iterations)
    )
    return ratios[int(0.025 * iterations)], ratios[int(0.975 * iterations) - 1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = harness.parser(
        "Runner overhead: decode tok/s of the baseline strategy through RunExecutor + worker "
        "vs a bare model.generate() on the demo model; pass if the ratio >= --min-ratio.",
        show_defaults=True,
    )
    parser.add_argument("--max-new-tokens", "-n", type=int, default=64, help="new tokens per trial (N)")
    add_repetitions(parser, 4, "alternating rounds")
    parser.add_argument(
        "--trials-per-round",
        type=int,
        default=2,
        help="measured trials per method per round (runner: per worker process)",
    )
    parser.add_argument("--warmup", type=int, default=1, help="runner warm-up trials per worker process")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="the fixed prompt (raw text)")
    parser.add_argument("--min-ratio", type=float, default=0.98, help="pass threshold for the ratio")
    parser.add_argument(
        "--min-new-tokens",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pass min_new_tokens=N to generate (its EOS-masking logits processors cost ~2 ms/step on "
        "CPU); --no-min-new-tokens relies on the prompt not reaching EOS (output length is checked)",
    )
    parser.add_argument(
        "--profile-reps",
        type=int,
        default=2,
        help="in-process host-overhead decomposition: trials per method (0 skips it)",
    )
    parser.add_argument(
        "--profile-tokens", type=int, default=32, help="new tokens per trial of the decomposition"
    )
    return parser.parse_args(argv)


@dataclass
class Rounds:
    """What the alternating rounds measured: each side's trials (dicts with their ``round``), its
    inter-token gaps, the worker's torch threads, and the problems found."""

    runner_rows: list[dict[str, Any]] = field(default_factory=list)
    gen_rows: list[dict[str, Any]] = field(default_factory=list)
    runner_gaps: list[float] = field(default_factory=list)
    gen_gaps: list[float] = field(default_factory=list)
    runner_threads: set[Any] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    #: the largest share of the CPUs other processes used during one round
    foreign_max: float = 0.0


def alternate(args: argparse.Namespace, spec: Any, hf: Any, input_ids: list[int], db: Path) -> Rounds:
    """``--repetitions`` rounds, runner and generate in ABBA order, each round's figures printed."""
    n = args.max_new_tokens
    m = Rounds()
    for r in range(args.repetitions):
        order = ("runner", "generate") if r % 2 == 0 else ("generate", "runner")
        for method in order:
            foreign = ForeignCpu()
            if method == "runner":
                res = run_runner(spec, db)
                m.runner_threads.add(res["threads"])
                if res["status"] != "ok":
                    m.problems.append(f"runner round {r}: status {res['status']}: {res['errors'][:1]}")
                for t in res["trials"]:
                    if t.status != "ok":
                        continue
                    m.runner_rows.append({**t.to_row(), "round": r})  # the benchmark's round, not the run's
                    if t.output_tokens != n:
                        m.problems.append(f"runner round {r}: {t.output_tokens} tokens, expected {n}")
                m.runner_gaps += res["gaps_ms"]
            else:
                for _ in range(args.trials_per_round):
                    g = run_generate(hf, input_ids, n, args.min_new_tokens)
                    m.gen_rows.append({"round": r, **g})
                    m.gen_gaps += g["gaps_ms"]
                    if g["output_tokens"] != n:
                        m.problems.append(f"generate round {r}: {g['output_tokens']} tokens, expected {n}")
            other = foreign.fraction()
            m.foreign_max = max(m.foreign_max, other or 0.0)
            rows = [x for x in (m.runner_rows if method == "runner" else m.gen_rows) if x["round"] == r]
            print(
                f"  round {r} {method:<8}: decode tok/s "
                + ", ".join(f"{x['decode_tokens_per_s']:.3f}" for x in rows)
                + "; TTFT ms "
                + ", ".join(f"{x['ttft_ms']:.1f}" for x in rows)
                + f"; CPU used by other processes {pct(other)}",
                flush=True,
            )
    return m


def comparison(m: Rounds, min_ratio: float) -> float:
    """Print the two sides' figures and their ratios; returns the decode tok/s ratio runner / generate."""

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows if r[key] is not None)

    r_tps, g_tps = med(m.runner_rows, "decode_tokens_per_s"), med(m.gen_rows, "decode_tokens_per_s")
    r_ttft, g_ttft = med(m.runner_rows, "ttft_ms"), med(m.gen_rows, "ttft_ms")
    r_gap, g_gap = statistics.median(m.runner_gaps), statistics.median(m.gen_gaps)
    ratio = r_tps / g_tps
    header = f"{'method':<9} {'n':>2} {'decode tok/s (median)':>22} {'min..max':>15} {'ms/token':>9} {'median gap ms':>14} {'TTFT ms':>9}"
    print()
    print(header)
    print("-" * len(header))
    for name, rows, tps, gap, ttft in (
        ("runner", m.runner_rows, r_tps, r_gap, r_ttft),
        ("generate", m.gen_rows, g_tps, g_gap, g_ttft),
    ):
        values = [x["decode_tokens_per_s"] for x in rows]
        print(
            f"{name:<9} {len(rows):>2} {tps:>22.3f} {min(values):>7.3f}..{max(values):<7.3f} "
            f"{1000 / tps:>9.2f} {gap:>14.2f} {ttft:>9.1f}"
        )
    print()
    print(f"ratio runner/generate decode tok/s (medians): {ratio:.4f}  (criterion >= {min_ratio})")
    low, high = bootstrap_ratio(
        [x["decode_tokens_per_s"] for x in m.runner_rows], [x["decode_tokens_per_s"] for x in m.gen_rows]
    )
    print(f"  95 % bootstrap interval of that ratio: [{low:.4f}, {high:.4f}]")
    if low < min_ratio <= high:
        print(
            "  (inconclusive: the machine's run-to-run noise is larger than the margin; "
            "see the decomposition below, or raise --repetitions)"
        )
    print(f"ratio by median inter-token gap (generate gap / runner gap): {g_gap / r_gap:.4f}")
    print(f"ratio TTFT (generate / runner): {g_ttft / r_ttft:.4f}")
    return ratio


def print_profile(profile: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the in-process decomposition of a decode step (:func:`host_profile`)."""
    print()
    print(
        f"decode step decomposition, in-process ({args.profile_tokens} tokens, "
        f"{args.profile_reps} trials each, alternating; medians):"
    )
    print(f"  {'method':<9} {'forward ms/step':>16} {'host ms/step outside forward':>29}")
    for name, label in (("runner", "runner"), ("generate", "generate")):
        if name in profile:
            d = profile[name]
            print(f"  {label:<9} {d['forward_ms']:>16.2f} {d['host_ms']:>29.3f}")
    if "runner" in profile and "generate" in profile:
        f = (profile["runner"]["forward_ms"] + profile["generate"]["forward_ms"]) / 2
        expected = (f + profile["generate"]["host_ms"]) / (f + profile["runner"]["host_ms"])
        print(
            f"  => expected ratio at equal forward time ({f:.1f} ms): {expected:.4f} "
            "(the runner's loop + probe vs generate's bookkeeping)"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import torch
    from transformers.utils import logging as hf_logging
    from workbench_strategies._hf import load_hf_model

    from workbench.core.device import resolve_device
    from workbench.core.strategy import Prompt

    hf_logging.disable_progress_bar()
    n = args.max_new_tokens
    started = time.perf_counter()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="wb-overhead-") as tmp:
        workload = Path(tmp) / "fixed.jsonl"
        workload.write_text(json.dumps({"id": "fixed", "prompt": args.prompt, "max_new_tokens": n}) + "\n")
        spec = build_spec(workload, args)
        variant = spec.variants[0]
        device = resolve_device(variant.device)
        hf = load_hf_model(variant, device, log=lambda m: print(m, file=sys.stderr))
        input_ids = hf.encode(Prompt(id="fixed", prompt=args.prompt))
        gen_threads = torch.get_num_threads()
        print(
            f"model {MODEL} {args.dtype} on {device}; prompt {len(input_ids)} tokens; N = {n}; "
            f"{args.repetitions} rounds x {args.trials_per_round} trials; "
            f"generate min_new_tokens={'N' if args.min_new_tokens else 'unset'}; torch threads here {gen_threads}; "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}",
            flush=True,
        )
        run_generate(hf, input_ids, n, args.min_new_tokens)  # warm-up, like the runner's warm-up trial
        foreign_all = ForeignCpu()
        m = alternate(args, spec, hf, input_ids, Path(tmp) / "overhead.db")
        other_all = foreign_all.fraction()
        profile = (
            host_profile(
                hf, spec, device, input_ids, args.profile_tokens, args.profile_reps, args.min_new_tokens
            )
            if args.profile_reps > 0
            else {}
        )
        # greedy outputs must agree (informative: the baseline claims token identity with generate)
        reference = hf.decode(m.gen_rows[0]["tokens"]) if m.gen_rows else None
        outputs_identical = all(t["output_text"] == reference for t in m.runner_rows)

    problems = m.problems
    if not m.runner_rows or not m.gen_rows:
        problems.append("no successful trials on one side")
        return verdict(problems)

    ratio = comparison(m, args.min_ratio)
    print(
        "greedy outputs identical (runner vs generate): "
        + (
            "yes"
            if outputs_identical
            else "NO (if the runner's text has an EOS in it: ignore_eos continues past EOS, "
            "min_new_tokens forbids it; otherwise a numerical difference)"
        )
    )
    if profile:
        print_profile(profile, args)
    print()
    print(f"torch threads: runner worker {sorted(m.runner_threads, key=str)}, generate {gen_threads}")
    print(
        f"CPU used by other processes: {pct(other_all)} overall, {pct(m.foreign_max)} worst round; "
        f"load average before {load_before}, after {loadavg()}; {time.perf_counter() - started:.0f} s wall"
    )
    if m.foreign_max > 0.10:
        print(
            "WARNING: other processes were using the CPUs during the measurement; "
            "the ratio is not trustworthy (rerun on an idle machine)"
        )
    if m.runner_threads != {gen_threads}:
        problems.append(f"thread counts differ: worker {m.runner_threads}, generate {gen_threads}")
    if ratio < args.min_ratio:
        problems.append(f"ratio {ratio:.4f} < {args.min_ratio}")
    print()
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
