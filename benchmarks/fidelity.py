"""Timing fidelity of the runner: does it measure what the strategy really costs?

What is measured
    The fake strategy (``workbench.testing.FakeStrategy``) waits known amounts of time: a prefill of
    ``prefill_ms + prefill_ms_per_token * input_tokens`` before the first token, then
    ``decode_ms_per_token`` per further token (delivered ``tokens_per_step`` at a time). A spec with
    several fake variants is built in code and run through the real path — ``RunExecutor`` → one
    ``python -m workbench.run.worker`` process per variant → ``TrialRunner`` → JSON events → the SQLite
    store — on the built-in ``code`` workload (3 prompts) and a long prompt from the built-in
    ``sweep-input`` workload (2000 tokens, so the per-input-token prefill cost is visible).
    The trials are then read back from the store and, per (variant, prompt), the median measured
    TTFT and TPOT are compared to the injected truth:

        truth TTFT = prefill_ms + prefill_ms_per_token * input_tokens
        truth TPOT = decode_ms_per_token

    Also checked (recomputation): every stored trial's metrics equal those recomputed from its stored
    ``steps`` rows with ``workbench.run.metrics.trial_metrics`` (the contract that every figure in
    ``trials`` can be recomputed from ``steps``).

Pass criterion (exit 0; exit 1 otherwise)
    - every (variant, prompt): |median TTFT - truth| <= max(3 % of truth, 1 ms), and the same for TPOT;
    - every trial has status ok and the planned number of output tokens;
    - the recomputation check finds no mismatch.

Runs in well under a minute (``--repetitions`` and ``--max-new-tokens`` scale it).

    python benchmarks/fidelity.py
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import harness
from harness import add_db, verdict

from workbench.run.execute import RunExecutor
from workbench.run.metrics import StepRecord, TrialMetrics, trial_metrics
from workbench.run.plan import plan_run
from workbench.run.runner import encode_prompt
from workbench.spec.parse import Spec, parse_spec
from workbench.store import Store
from workbench.testing import FakeSession

#: (name, fake-strategy parameters). decode_ms_per_token is the truth for TPOT.
CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("p40-d8", {"prefill_ms": 40, "decode_ms_per_token": 8}),
    ("p5-d1", {"prefill_ms": 5, "decode_ms_per_token": 1}),
    ("p100-d20-x4", {"prefill_ms": 100, "decode_ms_per_token": 20, "tokens_per_step": 4}),
    ("p20+0.05/tok-d4", {"prefill_ms": 20, "prefill_ms_per_token": 0.05, "decode_ms_per_token": 4}),
]

#: trial columns that must equal the metrics recomputed from the stored steps: all of them
RECOMPUTED = tuple(f.name for f in dataclasses.fields(TrialMetrics))


def build_spec_text(args: argparse.Namespace) -> str:
    lines = [
        'name = "benchmark: timing fidelity"',
        f"repetitions = {args.repetitions}",
        f"warmup = {args.warmup}",
        "",
    ]
    for name, params in CONFIGS:
        lines += ["[[variants]]", f'name = "{name}"', 'strategy = "fake"']
        lines += [f"{k} = {v!r}" for k, v in params.items()]
        lines.append("")
    lines += [
        "[[workloads]]",
        'name = "code"',
        f"limit = {args.limit}",
        f"max_new_tokens = {args.max_new_tokens}",
        "",
    ]
    if args.long_tokens > 0:
        lines += [
            "[[workloads]]",
            'name = "sweep-input"',
            f"input_tokens = [{args.long_tokens}]",
            f"max_new_tokens = {args.max_new_tokens}",
            "",
        ]
    return "\n".join(lines)


def within(measured: float, truth: float, pct: float, abs_ms: float) -> bool:
    return abs(measured - truth) <= max(truth * pct / 100, abs_ms)


def same(a: Any, b: Any) -> bool:
    """Equal, allowing only float rounding (the stored doubles normally round-trip exactly)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    return a == b


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = harness.parser(
        "Timing fidelity of the runner: fake strategy with injected costs, through the "
        "worker process path; median TTFT/TPOT vs the injected truth.",
        show_defaults=True,
    )
    parser.add_argument("--repetitions", type=int, default=5, help="measured repetitions per prompt")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up trials per workload")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens generated per trial")
    parser.add_argument("--limit", type=int, default=3, help="prompts of the built-in 'code' workload")
    parser.add_argument(
        "--long-tokens",
        type=int,
        default=2000,
        help="input length of the extra long prompt (built-in sweep-input); 0 leaves it out",
    )
    parser.add_argument("--tolerance-pct", type=float, default=3.0, help="relative tolerance (%%)")
    parser.add_argument("--tolerance-ms", type=float, default=1.0, help="absolute tolerance floor (ms)")
    add_db(parser, "keep the results database at this path (None: a temp file)")
    return parser.parse_args(argv)


#: (variant, workload, prompt) -> (input tokens, true TTFT ms, true TPOT ms)
Truth = dict[tuple[str, str, str], tuple[int, float, float]]


def injected_truth(spec: Spec) -> Truth:
    """The truth, computed independently of the run: the fake session's own tokenizer + the costs."""
    truth: Truth = {}
    for vplan in plan_run(spec):
        v = vplan.variant
        session = FakeSession(v.config)
        for t in vplan.trials:
            n_in = len(encode_prompt(session, t.prompt))
            c = v.config
            truth[(v.name, t.workload, t.prompt.id)] = (
                n_in,
                c.prefill_ms + c.prefill_ms_per_token * n_in,
                c.decode_ms_per_token,
            )
    return truth


def recomputation(
    trials: list[Any], steps: dict[int, list[Any]], truth: Truth, problems: list[str]
) -> tuple[int, int, int]:
    """Every stored trial (warm-ups included) against the metrics recomputed from its steps, its
    output and input lengths against the plan's; what differs goes to ``problems``. Returns the values
    compared, how many differ and how many are bit-identical."""
    compared = mismatched = exact = 0
    mismatches: list[str] = []
    for t in trials:
        if t.status != "ok":
            problems.append(f"trial {t.id} ({t.variant}/{t.prompt_id}) status {t.status}: {t.error}")
            continue
        records = [
            StepRecord(
                idx=s["idx"],
                t_ms=s["t_ms"],
                n_tokens=s["n_tokens"],
                draft_proposed=s["draft_proposed"],
                draft_accepted=s["draft_accepted"],
                draft_ms=s["draft_ms"],
                verify_ms=s["verify_ms"],
            )
            for s in steps[t.id]
        ]
        recomputed = trial_metrics(records, t.input_tokens).to_row()
        for col in RECOMPUTED:
            compared += 1
            exact += getattr(t, col) == recomputed[col]
            if not same(getattr(t, col), recomputed[col]):
                mismatched += 1
                mismatches.append(
                    f"trial {t.id} {col}: stored {getattr(t, col)!r}, recomputed {recomputed[col]!r}"
                )
        if t.output_tokens != t.max_new_tokens:
            problems.append(f"trial {t.id}: {t.output_tokens} output tokens, planned {t.max_new_tokens}")
        key = (t.variant, t.workload, t.prompt_id)
        if t.input_tokens != truth[key][0]:
            problems.append(f"trial {t.id}: input_tokens {t.input_tokens}, expected {truth[key][0]}")
    if mismatched:
        problems.append(f"recomputation: {mismatched} of {compared} values differ ({mismatches[0]} ...)")
    return compared, mismatched, exact


def medians_vs_truth(
    trials: list[Any], truth: Truth, args: argparse.Namespace, problems: list[str]
) -> tuple[tuple[float, str], tuple[float, str]]:
    """Print the table of medians against the truth per (variant, prompt); what is out of tolerance
    goes to ``problems``. Returns the worst relative TTFT and TPOT errors, each with where."""
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for t in trials:
        if t.status == "ok" and not t.warmup:
            groups[(t.variant, t.workload, t.prompt_id)].append(t)

    header = (
        f"{'variant':<16} {'prompt':<19} {'in':>5} {'n':>2} | {'TTFT true':>9} {'median':>8} "
        f"{'err ms':>7} {'err %':>6} | {'TPOT true':>9} {'median':>7} {'err ms':>7} {'err %':>6} | ok"
    )
    print(
        f"Runner timing fidelity: {len(CONFIGS)} fake variants through RunExecutor + worker processes; "
        f"{args.repetitions} reps, warmup {args.warmup}, {args.max_new_tokens} new tokens; "
        f"tolerance max({args.tolerance_pct:g} %, {args.tolerance_ms:g} ms)"
    )
    print()
    print(header)
    print("-" * len(header))
    worst_ttft = worst_tpot = (0.0, "")
    order = {name: i for i, (name, _) in enumerate(CONFIGS)}
    for key in sorted(groups, key=lambda k: (order[k[0]], k[1], k[2])):
        rows = groups[key]
        n_in, ttft_true, tpot_true = truth[key]
        ttft = statistics.median(r.ttft_ms for r in rows)
        tpot = statistics.median(r.tpot_ms for r in rows)
        ok_ttft = within(ttft, ttft_true, args.tolerance_pct, args.tolerance_ms)
        ok_tpot = within(tpot, tpot_true, args.tolerance_pct, args.tolerance_ms)
        e_ttft, e_tpot = ttft - ttft_true, tpot - tpot_true
        if abs(e_ttft) / ttft_true > abs(worst_ttft[0]):
            worst_ttft = (e_ttft / ttft_true, f"{key[0]}/{key[2]}")
        if abs(e_tpot) / tpot_true > abs(worst_tpot[0]):
            worst_tpot = (e_tpot / tpot_true, f"{key[0]}/{key[2]}")
        verdict = "yes" if ok_ttft and ok_tpot else "NO"
        print(
            f"{key[0]:<16} {key[1] + '/' + key[2]:<19.19} {n_in:>5} {len(rows):>2} | "
            f"{ttft_true:>9.3f} {ttft:>8.3f} {e_ttft:>+7.3f} {100 * e_ttft / ttft_true:>+6.2f} | "
            f"{tpot_true:>9.3f} {tpot:>7.3f} {e_tpot:>+7.3f} {100 * e_tpot / tpot_true:>+6.2f} | {verdict}"
        )
        if not ok_ttft:
            problems.append(f"{key[0]}/{key[2]}: median TTFT {ttft:.3f} ms vs truth {ttft_true:.3f} ms")
        if not ok_tpot:
            problems.append(f"{key[0]}/{key[2]}: median TPOT {tpot:.3f} ms vs truth {tpot_true:.3f} ms")
        if len(rows) != args.repetitions:
            problems.append(f"{key[0]}/{key[2]}: {len(rows)} measured trials, expected {args.repetitions}")
    configs = dict(CONFIGS)
    expected_groups = {k for k in truth if k[0] in configs}
    missing = expected_groups - set(groups)
    if missing:
        problems.append(f"no measured trials for {sorted(missing)[:3]}")
    return worst_ttft, worst_tpot


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = parse_spec(build_spec_text(args))
    truth = injected_truth(spec)

    with tempfile.TemporaryDirectory(prefix="wb-fidelity-") as tmp:
        db_path = args.db or Path(tmp) / "fidelity.db"
        store = Store(db_path)
        started = time.perf_counter()
        result = RunExecutor(spec, store).run()
        wall_s = time.perf_counter() - started
        trials = store.trials(result.run_id, include_warmup=True)
        steps = {t.id: store.steps(t.id) for t in trials}
        store.close()

    problems: list[str] = []
    if result.status != "ok":
        problems.append(f"run status {result.status}: {'; '.join(result.errors[:3])}")
    compared, mismatched, exact = recomputation(trials, steps, truth, problems)
    worst_ttft, worst_tpot = medians_vs_truth(trials, truth, args, problems)

    print()
    print(f"worst TTFT error: {100 * worst_ttft[0]:+.2f} % ({worst_ttft[1]})")
    print(f"worst TPOT error: {100 * worst_tpot[0]:+.2f} % ({worst_tpot[1]})")
    print(
        f"recomputation from steps: {compared - mismatched}/{compared} values equal "
        f"({exact} bit-identical) over {sum(t.status == 'ok' for t in trials)} trials (warm-ups included)"
    )
    print(f"run: status {result.status}, {len(trials)} trials, {wall_s:.1f} s wall")
    print()
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
