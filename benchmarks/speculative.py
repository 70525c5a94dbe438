"""Speculative decoding on the demo model: prompt lookup and a draft model, where copying pays and where not.

What is measured
    One run (``RunExecutor`` → one worker per variant, all resident, trials interleaved round by round
    so every variant sees the same machine state; → store), on ``demo:smollm2-135m`` in float32, greedy,
    ``--max-new-tokens`` for every prompt, ``--repetitions`` measured trials after one warm-up, on three
    workloads — both sides of the trade-off:

    summarise     the first prompt (a long report: text to copy from)
    abstractive   every prompt (``--limit``: the first N): answers in the model's own words (an abstractive summary of a history
                  text, a 3-turn chat, a code stub, explain / argue / plan), little to copy
    copy-edit     every prompt (``--limit`` likewise): the input returned changed a little (type hints, a typo, a table, ...)

    baseline       plain decoding (the reference)
    prompt-lookup  our loop, n-gram drafts from the prompt, ``schedule = "adaptive"`` (the default)
    speculative    the demo's speculative variant as resources/specs/demo.toml has it (the target's own
                   weights in int8, run by ONNX Runtime GenAI, as the draft), ``schedule = "adaptive"``
    self-fp16      our loop, draft = the same model in ``--draft-dtype`` (float16: half the bytes per
                   token; same tokenizer by construction), k = 6 at most, ``schedule = "adaptive"``
    with ``--fixed``: prompt-lookup-fixed and speculative-fixed, the same with ``schedule = "fixed"``
    (what they were before the adaptive schedule), and hf-assisted, transformers' assisted generation
    with the same draft and a constant draft length, to cross-check our loop.

    Per prompt, the ratio of the variant's median decode tok/s (the stored ``decode_tokens_per_s``:
    tokens after the first / first → last token) to the baseline's on the same prompt in the same run;
    a workload's ratio is the geometric mean over its prompts. TTFT likewise.

Pass criteria (exit 0; exit 1 otherwise), every trial identical to the baseline:
    prompt-lookup: >= 0.95x on every abstractive prompt; >= 2.5x on copy-edit; >= 3.0x on summarise;
    speculative:   >= 0.95x on every abstractive prompt (the demo's variant; >= 2x on chat / summarise /
                   code is benchmarks/cross_draft.py's);
    self-fp16:     >= 1.2x on summarise; >= 0.95x on every abstractive prompt;
    with --fixed:  speculative-fixed / hf-assisted >= 1.0 on summarise.

    python benchmarks/speculative.py            # ~15 min on a quiet 2-core CPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from harness import (
    DEMO_MODEL,
    add_db,
    add_repetitions,
    add_report,
    check_verdict,
    geomean,
    result_db,
    run_spec,
    summary,
    variant_toml,
    workload_toml,
)

if TYPE_CHECKING:
    from workbench.spec.parse import Spec
    from workbench.store import Store


def spec_text(args: argparse.Namespace) -> str:
    draft = f'draft = "{DEMO_MODEL}"\ndraft_dtype = "{args.draft_dtype}"\nnum_draft_tokens = {args.k}\n'
    variants = [
        ("baseline", ""),
        ("prompt-lookup", f'strategy = "prompt-lookup"\nnum_tokens = {args.pld_tokens}\n'),
        ("speculative", demo_speculative()),
        ("self-fp16", 'strategy = "speculative"\n' + draft),
    ]
    if args.fixed:
        variants += [
            (
                "prompt-lookup-fixed",
                f'strategy = "prompt-lookup"\nnum_tokens = {args.pld_tokens}\nschedule = "fixed"\n',
            ),
            ("speculative-fixed", 'strategy = "speculative"\n' + draft + 'schedule = "fixed"\n'),
            ("hf-assisted", 'strategy = "hf-assisted"\n' + draft + "confidence_threshold = 0.0\n"),
        ]
    head = f'name = "benchmark: speculative decoding"\nrepetitions = {args.repetitions}\nwarmup = 1\n'
    threads = f"threads = {args.threads}\n" if args.threads else ""
    body = "".join(variant_toml(name, threads + extra) for name, extra in variants)
    limit = args.limit or None
    workloads = (
        workload_toml("summarise", args.max_new_tokens, 1)
        + workload_toml("abstractive", args.max_new_tokens, limit)
        + workload_toml("copy-edit", args.max_new_tokens, limit)
    )
    return head + body + workloads


def demo_speculative() -> str:
    """The keys of the demo's speculative variant (resources/specs/demo.toml), less name/model/dtype."""
    from workbench.core.resources import resource_path
    from workbench.spec.parse import tomllib

    demo = tomllib.loads(resource_path("specs", "demo.toml").read_text(encoding="utf-8"))
    (table,) = [v for v in demo["variants"] if v["name"] == "speculative"]
    from workbench.spec.writer import toml_value

    return "".join(
        f"{key} = {toml_value(value)}\n"
        for key, value in table.items()
        if key not in ("name", "model", "dtype")
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = harness.parser(summary(__doc__), show_defaults=True)
    parser.add_argument("--max-new-tokens", "-n", type=int, default=96)
    add_repetitions(parser, 2)
    parser.add_argument("--num-draft-tokens", "-k", dest="k", type=int, default=6)
    parser.add_argument("--pld-tokens", type=int, default=10, help="prompt lookup's num_tokens (the cap)")
    parser.add_argument("--draft-dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument(
        "--fixed", action="store_true", help="also the fixed schedules and hf-assisted (the cross-check)"
    )
    parser.add_argument(
        "--limit", type=int, default=0, help="the first N prompts of abstractive and copy-edit (0: all)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads per worker (0: one per core); 1 on a machine other processes keep busy",
    )
    add_db(parser)
    add_report(
        parser, "run nothing: the tables and checks of the newest run in DB (a database kept with --db)"
    )
    return parser.parse_args(argv)


def run_or_load(args: argparse.Namespace) -> tuple[Store, Path, Spec, int]:
    """The store, its path, the spec and the run: the newest of ``--report``'s database, or a new one."""
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    if args.report:
        store = Store(args.report)
        run = store.resolve_run(None)  # the newest
        return store, args.report, parse_spec(run["spec"]), run["id"]
    db = result_db(args.db, "speculative.db")
    store = Store(db)
    spec = parse_spec(spec_text(args))
    return store, db, spec, run_spec(spec, store).run_id


#: (variant, workload, prompt) -> the variant's median decode tok/s over the baseline's
Ratios = dict[tuple[str, str, str], float]


def prompt_table(
    store: Store, trials: list[Any], variants: list[str]
) -> tuple[Ratios, dict[str, bool], list[str]]:
    """Print each variant's figures per prompt; returns the ratios, whether each variant's trials were
    all identical to the baseline, and the (variant, prompt) cells without a successful trial."""
    cells: dict[tuple[str, str, str], list[Any]] = {}  # (variant, workload, prompt) -> trials
    for t in trials:
        cells.setdefault((t.variant, t.workload, t.prompt_id), []).append(t)
    prompts = list(dict.fromkeys((t.workload, t.prompt_id) for t in trials))

    def ok(variant: str, workload: str, prompt: str) -> list[Any]:
        return [t for t in cells.get((variant, workload, prompt), []) if t.status == "ok"]

    def med(rows: list[Any], key: str) -> float | None:
        values = [getattr(t, key) for t in rows if getattr(t, key) is not None]
        return statistics.median(values) if values else None

    header = (
        f"{'variant':<20} {'workload/prompt':<28} {'tok/s':>7} {'vs base':>8} {'TTFT ms':>8} {'TTFT x':>7} "
        f"{'accept':>7} {'tok/step':>8} {'same':>5}"
    )
    print(header)
    ratio: Ratios = {}
    same: dict[str, bool] = {v: True for v in variants}
    failed: list[str] = []
    for variant in variants:
        for workload, prompt in prompts:
            rows = ok(variant, workload, prompt)
            base = ok("baseline", workload, prompt)
            label = f"{workload}/{prompt}"
            if not rows or not base:
                failed.append(f"{variant} {label}")
                print(f"{variant:<20} {label:<28} no successful trials")
                continue
            tps, base_tps = med(rows, "decode_tokens_per_s"), med(base, "decode_tokens_per_s")
            ttft, base_ttft = med(rows, "ttft_ms"), med(base, "ttft_ms")
            x = tps / base_tps if tps and base_tps else float("nan")
            ratio[(variant, workload, prompt)] = x
            proposed = sum(t.draft_tokens_proposed or 0 for t in rows)
            accepted = sum(t.draft_tokens_accepted or 0 for t in rows)
            steps = sum(len(store.steps(t.id)) for t in rows)
            tokens = sum(t.output_tokens for t in rows)
            identical = variant == "baseline" or all(t.matches_baseline == 1 for t in rows)
            same[variant] = same[variant] and identical
            print(
                f"{variant:<20} {label:<28} {tps or 0:>7.2f} {x:>7.2f}x {ttft or 0:>8.0f} "
                f"{(ttft or 0) / (base_ttft or 1):>6.2f}x {f'{accepted / proposed:.0%}' if proposed else '–':>7} "
                f"{tokens / steps:>8.2f} {'ref' if variant == 'baseline' else ('yes' if identical else 'NO'):>5}"
            )
        print()
    return ratio, same, failed


def per_prompt(ratio: Ratios, variant: str, workload: str) -> list[float]:
    return [r for (v, w, _), r in ratio.items() if v == variant and w == workload]


def workload_table(ratio: Ratios, variants: list[str]) -> None:
    """Print each variant's geometric mean ratio per workload."""
    print(f"{'variant':<20} " + " ".join(f"{w:>12}" for w in ("summarise", "abstractive", "copy-edit")))
    for variant in variants[1:]:
        cols = []
        for w in ("summarise", "abstractive", "copy-edit"):
            r = per_prompt(ratio, variant, w)
            cols.append(f"{geomean(r):>11.2f}x" if r else f"{'–':>12}")
        print(f"{variant:<20} " + " ".join(cols))


def checks(
    ratio: Ratios, same: dict[str, bool], failed: list[str], variants: list[str]
) -> list[tuple[str, bool]]:
    """The pass criteria (the module's docstring)."""
    found: list[tuple[str, bool]] = []

    def at_least(variant: str, workload: str, limit: float, *, every: bool) -> None:
        r = per_prompt(ratio, variant, workload)
        if not r:
            found.append((f"{variant} on {workload}: no figures", False))
            return
        figure = min(r) if every else geomean(r)
        what = "every prompt (lowest)" if every else "geometric mean"
        found.append(
            (f"{variant} {workload} decode {figure:.2f}x baseline >= {limit}, {what}", figure >= limit)
        )

    at_least("prompt-lookup", "abstractive", 0.95, every=True)
    at_least("prompt-lookup", "copy-edit", 2.5, every=False)
    at_least("prompt-lookup", "summarise", 3.0, every=False)
    at_least("speculative", "abstractive", 0.95, every=True)
    at_least("self-fp16", "summarise", 1.2, every=False)
    at_least("self-fp16", "abstractive", 0.95, every=True)
    for variant in variants[1:]:
        found.append((f"{variant}: every trial identical to the baseline", same[variant]))
    if "hf-assisted" in variants:  # --fixed
        ours = per_prompt(ratio, "speculative-fixed", "summarise")
        theirs = per_prompt(ratio, "hf-assisted", "summarise")
        if ours and theirs:
            x = geomean(ours) / geomean(theirs)
            found.append((f"speculative-fixed / hf-assisted on summarise {x:.2f} >= 1.0", x >= 1.0))
    if failed:
        found.append((f"trials failed: {', '.join(failed)}", False))
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store, db, spec, run_id = run_or_load(args)
    trials = store.trials(run_id)
    # the spec's order, the baseline (the reference) first: the trials' own order follows the rounds
    ran = {t.variant for t in trials}
    variants = [v.name for v in spec.variants if v.name in ran]
    measured = [t for t in trials if not t.warmup]
    reps = 1 + max((t.repetition for t in measured), default=-1)
    new_tokens = max((t.max_new_tokens or 0 for t in measured), default=0)
    print(
        f"\n{DEMO_MODEL} float32, greedy, {new_tokens} new tokens, {reps} reps (interleaved); db {db}, run {run_id}"
    )
    if not args.report:
        print(
            f"threads: {args.threads or 'one per core'}; draft {args.draft_dtype}, k <= {args.k}; "
            f"prompt lookup num_tokens <= {args.pld_tokens}"
        )
    print()
    ratio, same, failed = prompt_table(store, trials, variants)
    workload_table(ratio, variants)
    return check_verdict(checks(ratio, same, failed, variants))


if __name__ == "__main__":
    sys.exit(main())
