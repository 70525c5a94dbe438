"""Speculative decoding with a draft from another runtime: the target's own weights, quantized.

What is measured
    One interleaved run (``RunExecutor``: one worker per variant, all resident, round by round) on
    ``demo:smollm2-135m`` in float32, greedy, the demo's workloads (``chat``, ``summarise``, ``code``;
    ``--limit`` prompts each, ``--max-new-tokens`` each), ``--repetitions`` measured rounds after one
    warm-up. Variants (``--variants`` picks some):

    baseline     plain decoding (the reference)
    self-fp16    draft = the same model in transformers, fp16 weights (the demo's draft before)
    llama-q4_1   draft = the demo's own GGUF (Q4_1) in llama.cpp (needs llama-cpp-python)
    ort-int4     draft = the model built by ONNX Runtime GenAI's builder at int4 (needs onnxruntime-genai)
    ort-int8     the same at int8 (the demo's speculative variant)

    A runtime that is not installed leaves its variants out (printed). Decode tok/s is the stored
    ``decode_tokens_per_s``; the ratio vs the baseline is the median over rounds of the paired ratio
    (variant / baseline in the same round: same prompt, same minute of a shared machine's drift).
    Acceptance = accepted / proposed draft tokens; identical = greedy output equal to the baseline's.

Pass criteria (exit 0; exit 1 otherwise):
    ``--demo-variant`` (the demo's speculative variant) >= 2.0x the baseline on every workload, identical;
    self-fp16 >= 1.2x the baseline over all rounds, identical.

    python benchmarks/cross_draft.py                      # ~10-15 min on a 2-core CPU
    python benchmarks/cross_draft.py --variants baseline,llama-q4_1 --demo-variant llama-q4_1
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from typing import Any

import harness

WORKLOADS = ("chat", "summarise", "code")

HEAD = """
name = "benchmark: cross-runtime drafts"
repetitions = {reps}
warmup = 1
warmup_max_new_tokens = 8
"""

VARIANTS = {
    "baseline": "",
    "self-fp16": """
strategy = "speculative"
draft = "demo:smollm2-135m"
draft_dtype = "float16"
num_draft_tokens = {k}
""",
    "llama-q4_1": """
strategy = "speculative"
draft = "demo:smollm2-135m"
draft_runtime = "llama-cpp"
draft_threads = {threads}
num_draft_tokens = {k}
""",
    "ort-int4": """
strategy = "speculative"
draft = "demo:smollm2-135m"
draft_runtime = "onnxruntime-genai"
draft_precision = "int4"
draft_threads = {threads}
num_draft_tokens = {k}
""",
    "ort-int8": """
strategy = "speculative"
draft = "demo:smollm2-135m"
draft_runtime = "onnxruntime-genai"
draft_precision = "int8"
draft_threads = {threads}
num_draft_tokens = {k}
""",
}

NEEDS = {"llama-q4_1": "llama_cpp", "ort-int4": "onnxruntime_genai", "ort-int8": "onnxruntime_genai"}


def build_spec(variants: list[str], *, reps: int, n: int, limit: int, k: int, threads: int) -> str:
    parts = [HEAD.format(reps=reps)]
    for name in variants:
        parts.append(harness.variant_toml(name, VARIANTS[name].format(k=k, threads=threads)))
    for workload in WORKLOADS:
        parts.append(harness.workload_toml(workload, n, limit))
    return "".join(parts)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and the variants to run: ``--variants`` with the baseline, less those whose
    runtime is not installed (printed)."""
    parser = harness.parser(harness.summary(__doc__), show_defaults=True)
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS)
    )
    parser.add_argument(
        "--demo-variant", default="ort-int8", help="the variant held to the >= 2x target (the demo's draft)"
    )
    parser.add_argument("--max-new-tokens", "-n", type=int, default=64)
    parser.add_argument("--limit", type=int, default=2, help="prompts per workload")
    harness.add_repetitions(parser, 2)
    parser.add_argument("--num-draft-tokens", "-k", type=int, default=6)
    parser.add_argument(
        "--draft-threads", type=int, default=1, help="threads of the runtime drafts (0: the variant's)"
    )
    harness.add_db(parser)
    args = parser.parse_args(argv)

    wanted = harness.names(args.variants)
    unknown = [v for v in wanted if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if "baseline" not in wanted:
        wanted.insert(0, "baseline")
    variants = []
    for name in wanted:
        module = NEEDS.get(name)
        if module and importlib.util.find_spec(module) is None:
            print(f"{name}: left out ({module.replace('_', '-')} is not installed)", file=sys.stderr)
            continue
        variants.append(name)
    return args, variants


def table(
    trials: list[Any], variants: list[str]
) -> tuple[dict[tuple[str, str], list[float]], dict[str, bool]]:
    """Print each variant's figures per workload and over all; returns the paired decode ratios per
    (variant, workload or "all") and whether each variant's every trial was identical to the baseline."""
    base = {
        (t.round, t.workload, t.prompt_id): t for t in trials if t.variant == "baseline" and t.status == "ok"
    }
    header = f"{'variant':<11} {'workload':<10} {'decode tok/s':>12} {'vs baseline':>11} {'TTFT ms':>8} {'acceptance':>10} {'identical':>9}"
    print(header)
    ratios: dict[tuple[str, str], list[float]] = {}
    same: dict[str, bool] = {}
    for variant in variants:
        for workload in (*WORKLOADS, "all"):
            ts = [t for t in trials if t.variant == variant and (workload == "all" or t.workload == workload)]
            ok = [t for t in ts if t.status == "ok"]
            if not ok:
                error = ts[0].error if ts else "no trials"
                print(f"{variant:<11} {workload:<10} all trials failed: {error}")
                continue
            paired = [
                t.decode_tokens_per_s / b.decode_tokens_per_s
                for t in ok
                if (b := base.get((t.round, t.workload, t.prompt_id))) and b.decode_tokens_per_s
            ]
            ratio = statistics.median(paired) if paired else float("nan")
            ratios[(variant, workload)] = paired
            proposed = sum(t.draft_tokens_proposed or 0 for t in ok)
            accepted = sum(t.draft_tokens_accepted or 0 for t in ok)
            acceptance = f"{accepted / proposed:.0%}" if proposed else "-"
            n_same = sum(t.matches_baseline == 1 for t in ok)
            if variant == "baseline":
                identical = "ref"
            else:
                identical = f"{n_same}/{len(ok)}"
                if workload == "all":
                    same[variant] = n_same == len(ok) == len(ts)
            tps = statistics.median(t.decode_tokens_per_s for t in ok)
            ttft = statistics.median(t.ttft_ms for t in ok)
            print(
                f"{variant:<11} {workload:<10} {tps:>12.2f} {ratio:>10.2f}x {ttft:>8.0f} {acceptance:>10} {identical:>9}"
            )
    return ratios, same


def checks(
    ratios: dict[tuple[str, str], list[float]], same: dict[str, bool], variants: list[str], demo: str
) -> list[tuple[str, bool]]:
    """The pass criteria (the module's docstring); ``demo``: the variant held to the >= 2x target."""

    def median(variant: str, workload: str) -> float:
        return harness.median(ratios.get((variant, workload)) or [])

    found = []
    if demo in variants:
        for workload in WORKLOADS:
            r = median(demo, workload)
            found.append((f"{demo} on {workload}: decode {r:.2f}x baseline >= 2.0", r >= 2.0))
        found.append((f"{demo}: identical output", same.get(demo, False)))
    else:
        found.append((f"{demo}: not in this run", False))
    if "self-fp16" in variants:
        r = median("self-fp16", "all")
        found.append(
            (
                f"self-fp16: decode {r:.2f}x baseline >= 1.2, identical",
                r >= 1.2 and same.get("self-fp16", False),
            )
        )
    return found


def main(argv: list[str] | None = None) -> int:
    args, variants = parse_args(argv)

    from workbench.store import Store

    text = build_spec(
        variants,
        reps=args.repetitions,
        n=args.max_new_tokens,
        limit=args.limit,
        k=args.num_draft_tokens,
        threads=args.draft_threads,
    )
    db = harness.result_db(args.db, "cross_draft.db")
    store = Store(db)
    result = harness.run_spec(text, store)
    trials = [t for t in store.trials(result.run_id)]
    print(
        f"\ndemo:smollm2-135m float32 target, greedy, {args.max_new_tokens} new tokens, {args.limit} prompt(s) per "
        f"workload, {args.repetitions} rounds, k = {args.num_draft_tokens}, draft threads {args.draft_threads}; db {db}\n"
    )
    ratios, same = table(trials, variants)
    return harness.check_verdict(checks(ratios, same, variants, args.demo_variant))


if __name__ == "__main__":
    sys.exit(main())
