"""The CLI's plain-text tables: a run's variants, its comparison per variant × workload, and two runs
compared. Built here from the analysis (cells written by :mod:`.formatting`), printed by the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.report.formatting import (
    acceptance_text,
    fmt,
    libraries,
    match_text,
    mde_text,
    ratio,
    timing_cells,
)
from workbench.report.quality import QUALITY_HEADERS, quality_cells

__all__ = [
    "comparison_table",
    "noise_table",
    "run_comparison_table",
    "short",
    "text_table",
    "variants_table",
]

Table = tuple[list[str], list[list[Any]]]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, a rule under the headers."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def short(text: str, width: int = 40) -> str:
    """``text`` cut from the left to ``width`` characters (a model path keeps its end)."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def variants_table(variants: Sequence[dict[str, Any]]) -> Table:
    """A run's variants rows: device, dtype, load time, weights, status."""
    headers = ["variant", "strategy", "model", "device", "dtype", "load s", "weights MB", "status"]
    rows = [
        [
            v["name"],
            v["strategy"],
            short(v["model"]),
            v["device"],
            v["dtype"],
            fmt(v["load_ms"] / 1000 if v["load_ms"] else None, 1),
            fmt(v["weights_mb"], 0),
            v["status"] + (f": {v['error'][:60]}" if v["error"] else ""),
        ]
        for v in variants
    ]
    if any(v.get("python") for v in variants):  # some ran in another Python environment: say which
        headers += ["python", "libraries"]
        for row, v in zip(rows, variants, strict=True):
            row += [
                short(v["python"]) if v.get("python") else "(the workbench's)",
                libraries(v.get("packages")),
            ]
    return headers, rows


def comparison_table(summaries: Sequence[Any]) -> Table:
    """Medians and speed-ups per variant × workload (``analysis.summary.GroupSummary`` each), the e2e
    speed-up's minimum detectable effect beside it. Served variants add the client's mean TTFT and the
    server's own mean TTFT (means over the same requests: like with like); parallel streams add the concurrency and
    the aggregate tokens/s. Those columns appear only when some variant has them."""
    served = any(s.server for s in summaries)
    parallel = any(s.concurrency > 1 for s in summaries)
    scored = any(s.quality for s in summaries)
    rows = []
    for s in summaries:
        row = timing_cells(s, served=served, parallel=parallel)
        row += [ratio(s.speedup_e2e), mde_text(s.speedup_e2e), ratio(s.speedup_decode)]
        row += [acceptance_text(s), match_text(s)]
        row += quality_cells(s) if scored else []
        rows.append(row)
    headers = ["variant", "workload", "n", "in tok", "out tok", "TTFT ms"]
    headers += ["TTFT mean ms", "srv TTFT mean ms"] if served else []
    headers += ["TPOT ms", "decode tok/s", "e2e ms"]
    headers += ["conc", "agg tok/s"] if parallel else []
    headers += ["e2e speed-up", "MDE", "decode speed-up", "accepted", "match"]
    headers += QUALITY_HEADERS if scored else []
    return headers, rows


def run_comparison_table(results: Sequence[Any]) -> Table:
    """Two runs, variants matched by name (``analysis.compare.RunComparison`` each): medians A → B
    and RUN_B's speed-ups over RUN_A."""
    rows = [
        [
            r.variant,
            r.workload,
            f"{r.a['e2e_ms'].n}/{r.b['e2e_ms'].n}",
            f"{fmt(r.a['ttft_ms'].value, 1)} → {fmt(r.b['ttft_ms'].value, 1)}",
            f"{fmt(r.a['decode_tokens_per_s'].value, 1)} → {fmt(r.b['decode_tokens_per_s'].value, 1)}",
            f"{fmt(r.a['e2e_ms'].value, 0)} → {fmt(r.b['e2e_ms'].value, 0)}",
            ratio(r.speedup_e2e),
            ratio(r.speedup_ttft),
            ratio(r.speedup_decode),
        ]
        for r in results
    ]
    headers = ["variant", "workload", "n", "TTFT ms", "decode tok/s", "e2e ms", "e2e speed-up"]
    return [*headers, "TTFT speed-up", "decode speed-up"], rows


#: repetition counts the noise table projects the detectable effect to
NOISE_REPETITIONS = (3, 5, 10, 20)


def noise_table(summaries: Sequence[Any], prompts: dict[str, int]) -> Table:
    """An A/A run's noise floor (``analysis.summary.GroupSummary`` of the copy against the original):
    per workload and metric the A/A speed-up with its CI (± half-width), the minimum detectable
    effect now and at :data:`NOISE_REPETITIONS`, and what the CI is made of: the process-to-process
    spread (``process ±``: how far a pair of worker processes strays beyond its own trials) and a
    pair's own noise (``pair ±``); ``prompts``: workload → prompts per repetition."""
    from workbench.analysis.paired import mde_with

    rows = []
    for s in summaries:
        for label, est in (("e2e", s.speedup_e2e), ("TTFT", s.speedup_ttft), ("decode", s.speedup_decode)):
            if est is None:
                continue
            width = est.half_width
            per_rep = prompts.get(s.workload) or 1
            row = [s.workload, label, ratio(est), f"±{width:.1%}" if width is not None else "", mde_text(est)]
            row += [_pct(mde_with(est, n * per_rep)) for n in NOISE_REPETITIONS]
            row += [_pct(est.process_sd), _pct(est.pair_sd)]
            rows.append(row)
    headers = ["workload", "metric", "A/A speed-up", "CI ±", "MDE now"]
    headers += [f"MDE at {n} reps" for n in NOISE_REPETITIONS]
    return [*headers, "process ±", "pair ±"], rows


def _pct(value: float | None) -> str:
    return f"±{value:.1%}" if value is not None else ""
