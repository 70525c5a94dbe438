"""The GPU check's figures, asserted (scripts/gpu_check.sh; docs/ci.md "The GPU check"): a green check
proves the numbers are of the right size, not only that nothing crashed.

    python scripts/gpu_figures.py GPU_DB --expect NAME [--expect NAME...] [--cpu]
        [--show-json FILE] [--export-ok 0|1] [--not-covered TEXT...]

Checks, each printed as ``ok`` / ``FAIL`` with its figures (exit 1 when one fails):

- every expected variant is in the run, and every one of its measured trials is ``ok``;
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--expect", action="append", default=[], help="a variant the run must have")
    parser.add_argument("--cpu", action="store_true", help="the CPU fallback (no datasheet bandwidth)")
    parser.add_argument("--show-json", type=Path, help="what `workbench show --json` printed")
    parser.add_argument("--export-ok", type=int, choices=(0, 1), help="whether `workbench export` succeeded")
    parser.add_argument("--not-covered", action="append", default=[], help="what the check did not run")
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu else "cuda"
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
