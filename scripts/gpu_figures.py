"""The GPU check's figures, asserted (scripts/gpu_check.sh; docs/ci.md "The GPU check"): a green check
proves the numbers are of the right size, not only that nothing crashed.

    python scripts/gpu_figures.py GPU_DB --expect NAME [--expect NAME...] [--cpu]
        [--dtype NAME] [--cpu-reference CPU_DB] [--show-json FILE] [--export-ok 0|1]
        [--not-covered TEXT...]

Checks, each printed as ``ok`` / ``FAIL`` with its figures (exit 1 when one fails):

- every expected variant is in the run, and every one of its measured trials is ``ok``;
- every expected variant ran where and as asked: its recorded ``device`` is ``cuda:N`` (``cpu`` on
  ``--cpu``), a torch variant's ``dtype`` is ``--dtype`` (default bfloat16 on CUDA, float32 on
  ``--cpu``), and a runtime's ``backend`` (llama.cpp, ONNX Runtime GenAI) names CUDA with every
  layer offloaded; a torch variant records no backend (its device column says it all);
- every CUDA variant's median TPOT is at most a third of the same model's on the CPU
  (``--cpu-reference``: the check's short baseline run of that model on the machine's CPU): a CPU
  fallback fails it, where the absolute bounds below would pass a 1 B model decoding on a CPU;
- the measured device bandwidth is within 50-100 % of the GPU's datasheet figure (:data:`DATASHEET_GBS`;
  a GPU not in the table is said, not failed; on ``--cpu`` not asserted);
- TTFT and TPOT are of a plausible size for the model: every variant's median TTFT in
  (0, :data:`TTFT_MAX_MS`], TPOT in (0, :data:`TPOT_MAX_MS`], and the plain decoders' (one token per
  forward: baseline, quantized, prefix cache) TPOT no faster than reading their weights once at the
  datasheet bandwidth (the roofline; 10 % slack);
- every variant's peak memory is at least its weights;
- ``show --json`` parsed and lists every variant; ``export`` succeeded.

``--not-covered`` lines are repeated in the summary (what the check could not run here).
Standard library only: it runs in the check's venv and in the dry run alike.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path

#: datasheet memory bandwidth (GB/s) by a part of the CUDA device name, most specific first
DATASHEET_GBS = (
    ("B200", 8000.0),
    ("GH200", 4000.0),  # before H200, which its name contains
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5 (HBM3)
    ("H800", 3350.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100-PCIE-80GB", 1935.0),
    ("A100", 1555.0),  # 40 GB
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("A10", 600.0),
    ("RTX 6000 Ada", 960.0),
    ("RTX A6000", 768.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
    ("V100", 900.0),
    ("T4", 320.0),
)
BANDWIDTH_RANGE = (0.5, 1.0)
#: plausible bounds (ms) for the check's models: a 1.07 B random llama on a GPU; tiny ones on a CPU
TTFT_MAX_MS = {"cuda": 3000.0, "cpu": 30000.0}
TPOT_MAX_MS = {"cuda": 250.0, "cpu": 5000.0}
#: strategies that emit one token per forward pass: the weight-reading roofline bounds their TPOT
PLAIN_DECODERS = ("baseline", "quantized", "prefix-cache")
#: strategies that compute outside torch: their dtype is their own (a GGUF type, an ONNX precision),
#: where they ran is their ``backend``
RUNTIMES = ("llama-cpp", "ort-genai")
#: a CUDA variant's TPOT must be at most this share of the same model's CPU TPOT
CPU_SHARE = 1 / 3


def datasheet_gbs(gpu: str | None) -> float | None:
    for part, gbs in DATASHEET_GBS:
        if gpu and part in gpu:
            return gbs
    return None


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        self.failed += not ok

    def say(self, what: str) -> None:
        print(f"  --   {what}")


def cpu_tpot(db_path: Path) -> float | None:
    """The median TPOT of the ok measured trials of the latest run in ``db_path`` (the CPU reference);
    ``None`` when it has none."""
    if not db_path.exists():
        return None
    try:
        db = sqlite3.connect(db_path)
        rows = db.execute(
            "SELECT tpot_ms FROM trials WHERE run_id = (SELECT max(id) FROM runs) AND warmup = 0 "
            "AND status = 'ok' AND tpot_ms IS NOT NULL"
        ).fetchall()
    except sqlite3.Error:
        return None
    return statistics.median(r[0] for r in rows) if rows else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--expect", action="append", default=[], help="a variant the run must have")
    parser.add_argument("--cpu", action="store_true", help="the CPU fallback (no datasheet bandwidth)")
    parser.add_argument("--show-json", type=Path, help="what `workbench show --json` printed")
    parser.add_argument("--export-ok", type=int, choices=(0, 1), help="whether `workbench export` succeeded")
    parser.add_argument("--not-covered", action="append", default=[], help="what the check did not run")
    parser.add_argument("--dtype", help="a torch variant's dtype (default bfloat16; float32 on --cpu)")
    parser.add_argument(
        "--cpu-reference", type=Path, help="the same model's baseline run on the CPU (its TPOT bounds CUDA's)"
    )
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu else "cuda"
    want_dtype = args.dtype or ("float32" if args.cpu else "bfloat16")
    checks = Checks()
    print("Figures (scripts/gpu_figures.py):")
    if not args.db.exists():
        checks.check(False, f"{args.db} exists (the run stored nothing)")
        return 1
    db = sqlite3.connect(args.db)
    db.row_factory = sqlite3.Row
    (run_id, env_text) = db.execute("SELECT id, environment FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    host = (json.loads(env_text or "{}") or {}).get("host") or {}
    variants = {r["name"]: r for r in db.execute("SELECT * FROM variants WHERE run_id = ?", [run_id])}
    trials: dict[str, list[sqlite3.Row]] = {}
    for row in db.execute("SELECT * FROM trials WHERE run_id = ? AND warmup = 0", [run_id]):
        trials.setdefault(row["variant"], []).append(row)

    # every expected variant, every trial ok
    for name in args.expect:
        rows = trials.get(name, [])
        statuses = sorted({r["status"] for r in rows})
        checks.check(
            bool(rows) and statuses == ["ok"],
            f"{name}: {len(rows)} measured trials, status {', '.join(statuses) or 'none'}"
            + (f" ({variants[name]['error']})" if name in variants and variants[name]["error"] else ""),
        )

    # where and as what each variant ran: device, dtype, backend
    for name in args.expect:
        variant = variants.get(name)
        if variant is None:
            continue
        where, dtype, backend = variant["device"] or "", variant["dtype"] or "", variant["backend"]
        runtime = variant["strategy"] in RUNTIMES
        where_ok = where.startswith("cuda") if device == "cuda" else where == "cpu"
        dtype_ok = runtime or dtype == want_dtype
        checks.check(
            where_ok and dtype_ok,
            f"{name}: device {where or 'none'}"
            + ("" if where_ok else f" (expected {device})")
            + f", dtype {dtype or 'none'}"
            + (" (the runtime's own)" if runtime else "" if dtype_ok else f" (expected {want_dtype})"),
        )
        if runtime:
            text = backend or ""
            ok = ("cuda" in text.lower() and "partial" not in text) if device == "cuda" else bool(text)
            checks.check(
                ok,
                f"{name}: backend {text!r}" + (" (expected CUDA, every layer)" if device == "cuda" else ""),
            )
        elif backend:
            ok = device != "cuda" or "cuda" in backend.lower()
            checks.check(ok, f"{name}: backend {backend!r}")

    # bandwidth against the datasheet
    gpu = host.get("gpu") if not args.cpu else None
    sheet = datasheet_gbs(gpu)
    measured = [v["memory_bandwidth_gbs"] for v in variants.values() if v["memory_bandwidth_gbs"]]
    best = max(measured) if measured else None
    if args.cpu:
        checks.say(f"bandwidth {best and round(best)} GB/s measured: not asserted on the CPU fallback")
    elif sheet is None:
        checks.say(f"bandwidth {best and round(best)} GB/s: no datasheet figure for {gpu!r}: not asserted")
    else:
        lo, hi = BANDWIDTH_RANGE
        share = best / sheet if best else 0.0
        checks.check(
            lo <= share <= hi,
            f"bandwidth {best and round(best)} GB/s = {share:.0%} of the {gpu} datasheet {sheet:.0f} GB/s "
            f"(expected {lo:.0%}-{hi:.0%})",
        )

    # TTFT / TPOT plausible, the plain decoders not faster than the roofline; peak >= weights
    for name in args.expect:
        rows = [r for r in trials.get(name, []) if r["status"] == "ok"]
        if not rows:
            continue
        variant = variants.get(name)
        ttft = statistics.median(r["ttft_ms"] for r in rows if r["ttft_ms"] is not None)
        tpots = [r["tpot_ms"] for r in rows if r["tpot_ms"] is not None]
        tpot = statistics.median(tpots) if tpots else None
        checks.check(
            0 < ttft <= TTFT_MAX_MS[device],
            f"{name}: TTFT median {ttft:.1f} ms (0, {TTFT_MAX_MS[device]:.0f}]",
        )
        weights = variant["weights_mb"] if variant is not None else None
        floor = None
        if sheet and weights and variant is not None and variant["strategy"] in PLAIN_DECODERS:
            floor = 0.9 * weights * 2**20 / (sheet * 1e9) * 1000
        if tpot is None:
            checks.check(False, f"{name}: no TPOT")
        else:
            bound = f"[{floor:.2f} (roofline), " if floor else "(0, "
            checks.check(
                (floor or 0) < tpot <= TPOT_MAX_MS[device],
                f"{name}: TPOT median {tpot:.2f} ms in {bound}{TPOT_MAX_MS[device]:.0f}]",
            )
        peaks = [r["peak_memory_mb"] for r in rows if r["peak_memory_mb"] is not None]
        kind = variant["memory_kind"] if variant is not None else None
        if weights and peaks:
            checks.check(
                max(peaks) >= weights,
                f"{name}: peak {max(peaks):.0f} MB ({kind}) >= weights {weights:.0f} MB",
            )
        else:
            checks.check(
                False, f"{name}: peak {peaks and max(peaks)} MB, weights {weights} MB: not both known"
            )

    # every CUDA variant well faster than the same model on the CPU
    reference = cpu_tpot(args.cpu_reference) if args.cpu_reference else None
    if reference is None:
        checks.say("no CPU reference TPOT: the CUDA-vs-CPU speed not checked")
    elif device != "cuda":
        checks.say(f"CPU reference TPOT {reference:.2f} ms: the CUDA-vs-CPU speed not asserted on --cpu")
    else:
        for name in args.expect:
            tpots = [r["tpot_ms"] for r in trials.get(name, []) if r["status"] == "ok" and r["tpot_ms"]]
            if not tpots:
                continue
            tpot = statistics.median(tpots)
            checks.check(
                tpot <= CPU_SHARE * reference,
                f"{name}: TPOT median {tpot:.2f} ms <= a third of the CPU's {reference:.2f} ms",
            )

    # show --json and export
    if args.show_json is not None:
        try:
            shown = json.loads(args.show_json.read_text())
            text = json.dumps(shown)
            missing = [n for n in args.expect if n not in text]
            checks.check(not missing, "show --json parsed" + (f", missing {missing}" if missing else ""))
        except (OSError, ValueError) as exc:
            checks.check(False, f"show --json: {exc}")
    if args.export_ok is not None:
        checks.check(bool(args.export_ok), "export --format md")
    for line in args.not_covered:
        checks.say(f"not covered: {line}")
    print(f"Figures: {'all ok' if not checks.failed else f'{checks.failed} FAILED'}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
