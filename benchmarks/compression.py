"""Prompt compression on the demo model: does compressing the prompt pay on TTFT, and what does it cost?

What is measured
    One interleaved run (``RunExecutor`` → one worker per variant → store, quality pass on) of
    ``demo:smollm2-135m``, float32, greedy, on the built-in ``summarise`` and ``rag`` workloads (the
    long prompts: a report to summarise, context passages before a question) and ``document``: the
    commonest layout, one user message holding an instruction and then the document as one
    paragraph (the summarise workload's first report, its blank lines removed, cut at two lengths:
    ~300 and ~600 tokens, so that a break-even length can be fitted):

    baseline        the reference
    compress-self   prompt-compression, rate 0.5, the target itself as the compressor
    compress-trunc  prompt-compression, rate 0.5, the target's first ``--layers`` layers as the
                    compressor (cheap surprisal from a truncated model)

    Per variant × workload: the prompt tokens, the share kept (asked 0.5), the median compress_ms,
    TTFT and its ratio to the baseline's, the quality pass's mean KLD of the baseline's answer under
    the compressed prompt, and the break-even line the report prints (the prefill time saved and
    compression's cost per millisecond of it, measured on paired trials, and the prompt length from
    which it pays, with their intervals).

Pass criteria (exit 0; exit 1 otherwise): every trial ok; every compressing trial records
    compress_ms (inside its TTFT) and keeps at most 0.55 of its prompt; every compressing variant is
    scored by the quality pass; a break-even line is made for every compressing variant × workload;
    on ``document`` (two prompt lengths) with at least 2 repetitions, a break-even length is computed
    with its interval. Whether compression *wins* is the measurement, not a criterion: the figures
    are what this machine shows.

    python benchmarks/compression.py                      # ~10 min on a 2-core CPU
    python benchmarks/compression.py --limit 1 --repetitions 1 --max-new-tokens 8   # ~2 min
    python benchmarks/compression.py --workloads document --max-new-tokens 8        # ~3 min
"""

from __future__ import annotations

import json
import re
import statistics
import sys

import harness
from harness import add_db, add_repetitions, names, result_db, summary, variant_toml, verdict, workload_toml

WORKLOADS = ("summarise", "rag", "document")
#: the document workload's prompt lengths, in characters of the report (about 300 and 600 tokens)
DOCUMENT_CHARS = (1400, 2800)


def document_toml(max_new_tokens: int) -> str:
    """``document``: one user message, an instruction then the report as a single paragraph."""
    from workbench.core.resources import resource_path

    path = resource_path("workloads") / "summarise.jsonl"
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["prompt"]
    report = re.sub(r"\s*\n\s*", " ", first.split("\n\n", 1)[1])
    prompts = []
    for i, chars in enumerate(DOCUMENT_CHARS):
        cut = report[: report.rfind(". ", 0, chars) + 1]  # whole sentences
        text = "Write a short summary of the following report.\n\n" + cut
        prompts.append(f"{{id = {json.dumps(f'doc-{i + 1}')}, prompt = {json.dumps(text)}}}")
    return (
        f'\n[[workloads]]\nname = "document"\nas_chat = true\nmax_new_tokens = {max_new_tokens}\n'
        f"prompts = [{', '.join(prompts)}]\n"
    )


def spec_text(
    repetitions: int,
    limit: int | None,
    max_new_tokens: int,
    layers: int,
    workloads: tuple[str, ...] = WORKLOADS,
) -> str:
    head = (
        f'name = "benchmark: prompt compression"\nrepetitions = {repetitions}\nwarmup = 1\nquality = true\n'
    )
    variants = (
        variant_toml("baseline")
        + variant_toml("compress-self", 'strategy = "prompt-compression"\nrate = 0.5\n')
        + variant_toml(
            "compress-trunc", f'strategy = "prompt-compression"\nrate = 0.5\ncompressor_layers = {layers}\n'
        )
    )
    tables = "".join(
        document_toml(max_new_tokens) if w == "document" else workload_toml(w, max_new_tokens, limit)
        for w in workloads
    )
    return head + variants + tables


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(summary(__doc__), show_defaults=True)
    add_repetitions(parser, 3)
    parser.add_argument("--limit", type=int, default=None, help="the first N prompts of each workload")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per answer")
    parser.add_argument("--layers", type=int, default=8, help="compress-trunc: the compressor's layers")
    parser.add_argument(
        "--workloads", type=names, default=list(WORKLOADS), help="comma-separated, of " + ", ".join(WORKLOADS)
    )
    add_db(parser)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(WORKLOADS)}")
    workloads = tuple(w for w in WORKLOADS if w in args.workloads)

    from workbench.analysis.run import analyze_run
    from workbench.report.model import Report, render_text
    from workbench.report.run_report import compression_section
    from workbench.store import Store

    db = result_db(args.db, "compression.db")
    store = Store(db)
    result = harness.run_spec(
        spec_text(args.repetitions, args.limit, args.max_new_tokens, args.layers, workloads), store
    )
    trials = [t for t in store.trials(result.run_id) if not t.warmup]
    problems = [f"{t.variant} {t.workload} {t.prompt_id}: {t.error}" for t in trials if t.status != "ok"]
    analysis = analyze_run(store.load_run(result.run_id))
    quality = {r["variant"]: r for r in store.quality_variants(result.run_id)}
    kld: dict[tuple[str, str], list[float]] = {}
    for p in store.quality_positions(result.run_id):
        if p["source"] == "output":
            kld.setdefault((p["variant"], p["workload"]), []).append(p["kld"])

    ok = [t for t in trials if t.status == "ok"]
    print(
        f"{'variant':15s} {'workload':10s} {'in tok':>7s} {'kept':>5s} {'compress':>9s} {'TTFT':>9s} "
        f"{'TTFT x':>7s} {'KLD':>8s}"
    )
    for workload in workloads:
        base = {
            (t.prompt_id, t.repetition): t for t in ok if t.variant == "baseline" and t.workload == workload
        }
        for variant in ("baseline", "compress-self", "compress-trunc"):
            mine = [t for t in ok if t.variant == variant and t.workload == workload]
            if not mine:
                problems.append(f"{variant} has no ok trial on {workload}")
                continue
            kept = statistics.median(1 - (t.trimmed_tokens or 0) / (t.input_tokens or 1) for t in mine)
            ttft = statistics.median(t.ttft_ms or 0 for t in mine)
            ratios = [  # paired: the baseline's trial of the same prompt and repetition
                base[k].ttft_ms / t.ttft_ms
                for t in mine
                if (k := (t.prompt_id, t.repetition)) in base and t.ttft_ms
            ]
            compress = [t.compress_ms for t in mine if t.compress_ms is not None]
            k = kld.get((variant, workload))
            print(
                f"{variant:15s} {workload:10s} {statistics.median(t.input_tokens or 0 for t in mine):7.0f} "
                f"{kept:5.2f} {statistics.median(compress) if compress else float('nan'):7.0f}ms "
                f"{ttft:7.0f}ms {statistics.median(ratios) if ratios else float('nan'):6.2f}x "
                f"{statistics.fmean(k) if k else float('nan'):8.4f}"
            )
            if variant != "baseline":
                if len(compress) != len(mine) or any(
                    t.compress_ms is None or not 0 < t.compress_ms < (t.ttft_ms or 0) for t in mine
                ):
                    problems.append(f"{variant} on {workload}: compress_ms missing or outside the TTFT")
                if kept > 0.55:
                    problems.append(f"{variant} on {workload} kept {kept:.2f} of its prompt (> 0.55)")
    for variant in ("compress-self", "compress-trunc"):
        status = quality.get(variant, {}).get("status")
        if status != "scored":
            problems.append(f"the quality pass did not score {variant} ({status})")
    found = {(b.variant, b.workload): b for b in analysis.compression}
    for variant in ("compress-self", "compress-trunc"):
        for workload in workloads:
            b = found.get((variant, workload))
            if b is None:
                problems.append(f"no break-even line for {variant} on {workload}")
            elif (
                workload == "document"
                and args.repetitions >= 2
                and (b.break_even is None or b.break_even_lo is None)
            ):
                problems.append(
                    f"no break-even length with an interval for {variant} on document: {b.no_break_even or 'no interval'}"
                )
    print()
    print(render_text(Report("", [], [compression_section(analysis)])).strip())
    print(f"\nresults: {db} (run {result.run_id})")
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
