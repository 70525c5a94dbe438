"""The GPU check's optional second step (scripts/gpu_check.sh, ``GPU_CHECK_AUTO_ORDER_S``; docs/ci.md
"The GPU check"): measure the quantization methods ``quantization = "auto"`` tries on CUDA and say
whether their documented order (``AUTO_ORDER_CUDA`` in strategies/quantized, taken from the methods'
own documentation) holds: each method's median TPOT no slower than the next one's. It only means
something on a GPU: on a CPU the order is ``AUTO_ORDER``, measured there already.

    python scripts/gpu_auto_order.py spec MODEL DEVICE > auto-order.toml   # the methods available here
    python scripts/gpu_auto_order.py judge DB                              # after `workbench run`

``judge`` prints the measured order and the verdict (``holds`` / ``does not hold`` / ``not judged``)
and exits 0 in every case: the order is a default, not a result to fail the check on.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PREFIX = "auto-order "


def judge(order: Sequence[str], tpot: Mapping[str, float]) -> tuple[bool | None, str]:
    """Whether ``order`` (fastest first) holds for the measured median TPOTs ``tpot`` (ms) of the
    methods that ran: ``None`` (not judged) when fewer than two of them ran."""
    ran = [m for m in order if m in tpot]
    missing = [m for m in order if m not in tpot]
    gone = f"; not measured: {', '.join(missing)}" if missing else ""
    if len(ran) < 2:
        return None, f"AUTO_ORDER_CUDA not judged: fewer than two of its methods measured{gone}"
    measured = sorted(ran, key=lambda m: tpot[m])
    inversions = [
        f"{later} ({tpot[later]:.2f} ms) before {earlier} ({tpot[earlier]:.2f} ms)"
        for i, earlier in enumerate(ran)
        for later in ran[i + 1 :]
        if tpot[later] < tpot[earlier]
    ]
    fastest = ", ".join(f"{m} {tpot[m]:.2f} ms" for m in measured)
    if inversions:
        return False, f"AUTO_ORDER_CUDA does not hold: measured {fastest}: " + "; ".join(inversions) + gone
    return True, f"AUTO_ORDER_CUDA holds: measured {fastest}{gone}"


def spec(model: str, device: str) -> str:
    from workbench_strategies.quantized import AUTO_ORDER_CUDA, method_unavailable_reason

    lines = [
        'name = "gpu check: quantization = auto, the CUDA order measured"',
        "repetitions = 1",
        "warmup = 1",
        "warmup_max_new_tokens = 16",
        'workers = "one"',
        "quality = false  # speed only: the methods' quality is the main run's",
    ]
    for method in AUTO_ORDER_CUDA:
        why = method_unavailable_reason(method, device)
        if why:
            print(f"gpu_auto_order: {method} skipped ({why})", file=sys.stderr)
            continue
        lines += [
            "",
            "[[variants]]",
            f'name = "{PREFIX}{method}"',
            f'model = "{model}"',
            f'device = "{device}"',
        ]
        lines += ['strategy = "quantized"', f'method = "{method}"']
        if method == "int4-weight-only":
            lines.append("group_size = 128")  # as the main run's int4 variant
    lines += ["", "[[workloads]]", 'name = "chat"', "limit = 2", "max_new_tokens = 64", "ignore_eos = true"]
    return "\n".join(lines) + "\n"


def measured(db_path: Path) -> dict[str, float]:
    db = sqlite3.connect(db_path)
    rows = db.execute(
        "SELECT variant, tpot_ms FROM trials WHERE run_id = (SELECT max(id) FROM runs) AND warmup = 0 "
        "AND status = 'ok' AND tpot_ms IS NOT NULL"
    ).fetchall()
    by: dict[str, list[float]] = {}
    for variant, tpot in rows:
        if variant.startswith(PREFIX):
            by.setdefault(variant[len(PREFIX) :], []).append(tpot)
    return {m: statistics.median(v) for m, v in by.items()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "spec":
        print(spec(args[1], args[2]), end="")
        return 0
    if len(args) == 2 and args[0] == "judge":
        from workbench_strategies.quantized import AUTO_ORDER_CUDA

        db = Path(args[1])
        _, text = judge(AUTO_ORDER_CUDA, measured(db) if db.exists() else {})
        print(text)
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
