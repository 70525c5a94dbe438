"""Speculative decoding on the demo model: prompt lookup, a draft model, and transformers' own path.

What is measured
    One run (``RunExecutor`` → one worker per variant → store), on ``demo:smollm2-135m`` in float32,
    the first ``summarise`` prompt (a long report, so prompt lookup has text to copy), greedy, the same
    ``--max-new-tokens`` for every variant, ``--repetitions`` measured trials after one warm-up:

    baseline       plain decoding (the reference)
    prompt-lookup  our loop, n-gram drafts from the prompt
    speculative    our loop, draft = the same model in ``--draft-dtype`` (float16: half the bytes per
                   token, so it drafts faster on a CPU; same tokenizer by construction)
    hf-assisted    transformers' assisted generation with the same draft and draft length
                   (constant schedule, no confidence cut-off), to cross-check our loop
    baseline-end   the baseline again, last: a shared machine's speed drifts over minutes (±10-30 %
                   seen here), so the reference is the median over both baseline runs' trials and
                   the drift between them is printed

    Decode tok/s is the stored ``decode_tokens_per_s`` (tokens after the first / first → last token).

Pass criteria (exit 0; exit 1 otherwise), from issue 3:
    prompt-lookup decode tok/s >= 2.0x baseline, identical output;
    speculative decode tok/s >= 1.2x baseline, identical output;
    speculative / hf-assisted decode tok/s >= 1.0.

    python benchmarks/speculative.py            # ~5 min on a 2-core CPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

SPEC = """
name = "benchmark: speculative decoding"
repetitions = {reps}
warmup = 1

[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
dtype = "float32"

[[variants]]
name = "prompt-lookup"
model = "demo:smollm2-135m"
strategy = "prompt-lookup"
dtype = "float32"
num_tokens = {pld_tokens}

[[variants]]
name = "speculative"
model = "demo:smollm2-135m"
strategy = "speculative"
dtype = "float32"
draft = "demo:smollm2-135m"
draft_dtype = "{draft_dtype}"
num_draft_tokens = {k}
adaptive = false

[[variants]]
name = "hf-assisted"
model = "demo:smollm2-135m"
strategy = "hf-assisted"
dtype = "float32"
draft = "demo:smollm2-135m"
draft_dtype = "{draft_dtype}"
num_draft_tokens = {k}
confidence_threshold = 0.0

[[variants]]
name = "baseline-end"
model = "demo:smollm2-135m"
dtype = "float32"

[[workloads]]
name = "summarise"
limit = 1
max_new_tokens = {n}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--max-new-tokens", "-n", type=int, default=96)
    parser.add_argument("--repetitions", "-r", type=int, default=2)
    parser.add_argument("--num-draft-tokens", "-k", type=int, default=6)
    parser.add_argument("--pld-tokens", type=int, default=10, help="prompt lookup draft length")
    parser.add_argument("--draft-dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--db", type=Path, help="keep the results database here")
    args = parser.parse_args(argv)

    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    text = SPEC.format(
        reps=args.repetitions,
        n=args.max_new_tokens,
        k=args.num_draft_tokens,
        pld_tokens=args.pld_tokens,
        draft_dtype=args.draft_dtype,
    )
    db = args.db or Path(tempfile.mkdtemp(prefix="wb-bench-")) / "speculative.db"
    store = Store(db)
    result = RunExecutor(
        parse_spec(text),
        store,
        on_progress=lambda p: p.message and print(f"  [{p.done}/{p.total}] {p.message}", file=sys.stderr),
    ).run()
    trials = store.trials(result.run_id)
    by_variant: dict[str, list[dict]] = {}
    for t in trials:
        by_variant.setdefault(t["variant"], []).append(t)

    def median(variant: str, key: str) -> float:
        return statistics.median(t[key] for t in by_variant[variant] if t["status"] == "ok")

    both = [t for v in ("baseline", "baseline-end") for t in by_variant[v] if t["status"] == "ok"]
    base = statistics.median(t["decode_tokens_per_s"] for t in both)
    drift = median("baseline-end", "decode_tokens_per_s") / median("baseline", "decode_tokens_per_s")
    print(
        f"\ndemo:smollm2-135m float32, summarise/doc-1, {args.max_new_tokens} new tokens, "
        f"{args.repetitions} reps; draft {args.draft_dtype}, k = {args.num_draft_tokens}; db {db}\n"
        f"reference: median over both baseline runs, {base:.2f} tok/s (the last ran at {drift:.2f}x the "
        "first: the machine's drift)\n"
    )
    print(
        f"{'variant':<14} {'decode tok/s':>12} {'vs baseline':>11} {'TTFT ms':>9} {'acceptance':>10} "
        f"{'tok/step':>8} {'identical':>9}"
    )
    rows = {}
    for variant, ts in by_variant.items():
        ok = [t for t in ts if t["status"] == "ok"]
        if not ok:
            print(f"{variant:<14} all trials failed: {ts[0]['error']}")
            rows[variant] = None
            continue
        tps = median(variant, "decode_tokens_per_s")
        proposed = sum(t["draft_tokens_proposed"] or 0 for t in ok)
        accepted = sum(t["draft_tokens_accepted"] or 0 for t in ok)
        steps = sum(len(store.steps(t["id"])) for t in ok)
        tokens = sum(t["output_tokens"] for t in ok)
        identical = (
            "ref" if variant == "baseline" else f"{sum(t['matches_baseline'] == 1 for t in ok)}/{len(ok)}"
        )
        rows[variant] = (
            tps / base,
            all(t["matches_baseline"] == 1 for t in ok) if variant != "baseline" else True,
        )
        acceptance = f"{accepted / proposed:.0%}" if proposed else "–"
        print(
            f"{variant:<14} {tps:>12.2f} {tps / base:>10.2f}x {median(variant, 'ttft_ms'):>9.0f} "
            f"{acceptance:>10} {tokens / steps:>8.2f} {identical:>9}"
        )

    checks = []
    if rows.get("prompt-lookup"):
        ratio, same = rows["prompt-lookup"]
        checks.append(
            (f"prompt-lookup decode {ratio:.2f}x baseline >= 2.0, identical", ratio >= 2.0 and same)
        )
    if rows.get("speculative"):
        ratio, same = rows["speculative"]
        checks.append((f"speculative decode {ratio:.2f}x baseline >= 1.2, identical", ratio >= 1.2 and same))
    if rows.get("speculative") and rows.get("hf-assisted"):
        ours = rows["speculative"][0] / rows["hf-assisted"][0]
        checks.append((f"speculative / hf-assisted decode {ours:.2f} >= 1.0", ours >= 1.0))
    print()
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    passed = len(checks) == 3 and all(ok for _, ok in checks)
    print("\nPASS" if passed else "\nFAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
