"""The detection floor of the equivalence check: the smallest planted acceptance tolerance (nats) whose
changed outputs a real bfloat16 run of the demo model calls not equivalent.

What is measured
    ``demo:smollm2-135m`` in bfloat16 (``--device``, cpu by default), greedy, ``ignore_eos``, on
    built-in workloads (``--workloads``, default ``code,abstractive``; ``--limit`` prompts each,
    ``--max-new-tokens``). One interleaved run, one repetition, the quality pass on: the baseline,
    the honest ``speculative`` variant and one ``planted-tolerance`` variant per tolerance τ
    (``--tolerances``, default 0.01 … 1 nats, log-spaced). ``planted-tolerance``
    (tests/plugins/planted_faults.py, registered through the ``workbench.strategies`` entry point
    for the run) is the speculative strategy whose greedy acceptance takes a draft token whose target
    log-probability is within τ nats of the argmax's. The draft of both: the demo model's first
    ``--draft-layers`` layers (27 of 30; saved once next to the database), with a fixed draft length
    (``--k``): a draft that agrees with the target often and proposes a close runner-up
    sometimes, so that a tolerance has tokens to accept (the demo's own draft, the same weights in
    int8, agrees almost always: a tolerance would rarely touch an output). Even so the demo model is
    confident: over 32 tokens of a prompt, the 27-layer draft proposed about three tokens within 1 nat
    of the argmax (20 layers: about one), so a small τ changes an output only on enough prompts.

    Per τ: how many outputs differ from the honest variant's (and from the baseline's), and the
    check's status for it (``workbench.analysis.equivalence``: identical / equivalent /
    unexplained / mismatch / unchecked) with its divergences. A τ is *caught* when it changed an
    output and its status is neither identical nor equivalent, *missed* when it changed an output
    and was called identical or equivalent, and has *nothing to catch* when it changed none.
    The detection floor is the smallest τ caught; the largest τ missed is printed beside it (above
    it the check is not yet monotonic in τ).

Output
    The table, the floor, the host's CPU flags and load; a JSON file with the same (``--json``,
    default ``detection_floor.json`` beside the database).

Pass criterion (exit 0; exit 1 otherwise)
    the run ok, the honest speculative variant identical or equivalent, and some τ caught. The floor
    itself is the measurement, not a criterion (docs/metrics.md, "Detection floor").

    python benchmarks/detection_floor.py [--tolerances 0.01,0.03,0.1,0.3,1] [--limit 2] [--db floor.db]
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import DEMO_MODEL, summary, verdict

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "tests" / "plugins"
DEFAULT_TOLERANCES = "0.01,0.02,0.05,0.1,0.2,0.5,1"


def _arguments() -> Any:
    p = harness.parser(summary(__doc__), show_defaults=True)
    p.add_argument(
        "--tolerances", default=DEFAULT_TOLERANCES, help="the tolerances τ (nats), comma-separated"
    )
    p.add_argument("--workloads", default="code,abstractive", help="built-in workloads, comma-separated")
    p.add_argument("--limit", type=int, default=3, help="prompts per workload (0: all)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--device", default="cpu")
    p.add_argument("--draft-layers", type=int, default=27, help="the draft: the demo model's first N layers")
    p.add_argument("--k", type=int, default=3, help="draft tokens per step (a fixed schedule)")
    p.add_argument("--threads", type=int, default=0, help="threads per variant (0: the library's default)")
    p.add_argument(
        "--faults",
        default="",
        help="the other planted faults to run beside the tolerances, comma-separated: "
        f"{', '.join(OTHER_FAULTS)} (the prefix cache's on the first --conversations of the built-in conversation workload)",
    )
    p.add_argument(
        "--conversations", type=int, default=1, help="the built-in conversations for the prefix-cache faults"
    )
    p.add_argument("--json", type=Path, help="write the figures here (default: beside the database)")
    harness.add_db(p)
    return p.parse_args()


def _register_plugins(folder: Path) -> None:
    """The planted faults' distribution on this process's path and the workers' ``PYTHONPATH``."""
    sys.path.insert(0, str(PLUGINS))
    import planted_faults

    paths = planted_faults.write_distribution(folder)
    sys.path[:0] = paths
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])


def _draft(folder: Path, layers: int) -> Path:
    """The demo model's first ``layers`` layers, saved once in ``folder``."""
    dest = folder / f"demo-first-{layers}-layers"
    if (dest / "config.json").exists():
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.sources.demo import ensure_demo_model

    source = ensure_demo_model(DEMO_MODEL.removeprefix("demo:"))
    model = AutoModelForCausalLM.from_pretrained(source)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(source).save_pretrained(dest)
    return dest


#: the other planted faults: name -> (its honest twin, strategy, its keys besides the twin's)
OTHER_FAULTS: dict[str, tuple[str, str, str]] = {
    "stale-kv": ("speculative", "planted-stale-kv", ""),
    "position": ("speculative", "planted-position", "offset = 1\n"),
    "prefix-short": ("prefix-cache", "planted-prefix", 'fault = "short"\n'),
    "prefix-scaled": ("prefix-cache", "planted-prefix", 'fault = "scaled"\nscale = 1.01\n'),
}
_PREFIX_KEYS = "min_prefix_tokens = 16\n"


def _label(tolerance: float) -> str:
    return f"tolerance {tolerance:g}"


def _spec(args: Any, draft: Path, tolerances: list[float], faults: list[str]) -> str:
    threads = f"threads = {args.threads}\n" if args.threads else ""
    device = f'device = "{args.device}"\n{threads}'
    common = f'{device}draft = "{draft}"\nnum_draft_tokens = {args.k}\nschedule = "fixed"\n'
    text = 'name = "detection floor"\nrepetitions = 1\nwarmup = 0\nquality = true\n'
    text += harness.variant_toml("baseline", device, dtype="bfloat16")
    text += harness.variant_toml("speculative", 'strategy = "speculative"\n' + common, dtype="bfloat16")
    decoding = ["baseline", "speculative"]
    for tolerance in tolerances:
        body = f'strategy = "planted-tolerance"\n{common}tolerance = {tolerance!r}\n'
        text += harness.variant_toml(_label(tolerance), body, dtype="bfloat16")
        decoding.append(_label(tolerance))
    prefix = ["baseline"]
    if any(OTHER_FAULTS[f][0] == "prefix-cache" for f in faults):
        text += harness.variant_toml(
            "prefix-cache", f'strategy = "prefix-cache"\n{device}{_PREFIX_KEYS}', dtype="bfloat16"
        )
        prefix.append("prefix-cache")
    for fault in faults:
        twin, strategy, keys = OTHER_FAULTS[fault]
        base = common if twin == "speculative" else device + _PREFIX_KEYS
        text += harness.variant_toml(fault, f'strategy = "{strategy}"\n{base}{keys}', dtype="bfloat16")
        (decoding if twin == "speculative" else prefix).append(fault)
    runs = f"variants = {json.dumps(decoding)}\n" if len(prefix) > 1 else ""
    for workload in harness.names(args.workloads):
        text += (
            harness.workload_toml(workload, args.max_new_tokens, args.limit or None)
            + "ignore_eos = true\n"
            + runs
        )
    if len(prefix) > 1:
        text += harness.workload_toml("conversation", args.max_new_tokens, None)
        text += f"limit = {args.conversations}\nvariants = {json.dumps(prefix)}\n"
    return text


def _host() -> dict[str, Any]:
    flags: set[str] = set()
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        flags = set(re.findall(r"\b(avx512[a-z_0-9]*|avx2|fma|f16c|amx[a-z_0-9]*)\b", cpuinfo))
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_flags": sorted(flags),
        "load": [round(x, 2) for x in load] if load else None,
    }


def _figures(store: Any, run_id: int, tolerances: list[float], faults: list[str]) -> dict[str, Any]:
    from workbench.analysis.run import analyze_run
    from workbench.report.equivalence import equivalence_text

    outputs: dict[str, dict[tuple[str, str], list[int]]] = {}
    for t in store.trials(run_id):
        if not t.warmup and t.status == "ok" and t.output_token_ids:
            outputs.setdefault(t.variant, {})[(t.workload, t.prompt_id)] = json.loads(t.output_token_ids)
    equivalence = analyze_run(store.load_run(run_id)).equivalence
    checks = dict(equivalence.variants) if equivalence is not None else {}
    base = outputs.get("baseline", {})

    def row(name: str, tolerance: float | None, twin: str = "speculative") -> dict[str, Any]:
        mine = outputs.get(name, {})
        honest = outputs.get(twin, {})
        check = checks.get(name)
        status = check.status if check is not None else None
        changed = sum(1 for key, out in mine.items() if honest.get(key) != out)
        if name == twin:
            outcome = "honest"
        elif not changed:
            outcome = "nothing to catch"
        else:
            outcome = "missed" if status in ("identical", "equivalent", None) else "caught"
        return {
            "variant": name,
            "tolerance": tolerance,
            "outputs": len(mine),
            "changed_vs_honest": changed,
            "changed_vs_baseline": sum(1 for key, out in mine.items() if base.get(key) != out),
            "status": status,
            "divergences": len(check.divergences) if check is not None else None,
            "unexplained": sum(1 for d in check.divergences if d.explained is False) if check else None,
            "words": equivalence_text(check) if check is not None else None,
            "outcome": outcome,
        }

    rows = [row("speculative", None)] + [row(_label(t), t) for t in tolerances]
    if "prefix-cache" in outputs:
        rows.append(row("prefix-cache", None, "prefix-cache"))
    rows += [row(f, None, OTHER_FAULTS[f][0]) for f in faults]
    caught = [r["tolerance"] for r in rows if r["outcome"] == "caught" and r["tolerance"] is not None]
    missed = [r["tolerance"] for r in rows if r["outcome"] == "missed" and r["tolerance"] is not None]
    floor = equivalence.floor if equivalence is not None else None
    return {
        "rows": rows,
        "detection_floor_nats": min(caught) if caught else None,
        "largest_missed_nats": max(missed) if missed else None,
        "faults_missed": [r["variant"] for r in rows if r["tolerance"] is None and r["outcome"] == "missed"],
        "run_margin_nats": floor.margin if floor is not None else None,
    }


def _print(figures: dict[str, Any]) -> None:
    print(
        f"\n{'variant':<16} {'outputs':>7} {'changed':>8} {'vs base':>8} {'status':<12} {'div':>4} {'unexpl':>6}  outcome"
    )
    for r in figures["rows"]:
        print(
            f"{r['variant']:<16} {r['outputs']:>7} {r['changed_vs_honest']:>8} {r['changed_vs_baseline']:>8} "
            f"{r['status'] or '-':<12} {r['divergences'] if r['divergences'] is not None else '-':>4} "
            f"{r['unexplained'] if r['unexplained'] is not None else '-':>6}  {r['outcome']}"
        )
    print(
        "\n(changed: outputs that differ from the honest speculative variant's; vs base: from the baseline's)"
    )
    for r in figures["rows"]:
        if r["words"]:
            print(f"  {r['variant']}: {r['words']}")
    floor, missed = figures["detection_floor_nats"], figures["largest_missed_nats"]
    print(f"\ndetection floor: {'none caught' if floor is None else f'{floor:g} nats'}")
    print(f"largest tolerance missed: {'none' if missed is None else f'{missed:g} nats'}")
    if figures["faults_missed"]:
        print(f"other planted faults missed: {', '.join(figures['faults_missed'])}")
    if figures["run_margin_nats"] is not None:
        print(f"the run's near-tie margin (today's check): {figures['run_margin_nats']:.3f} nats")


def main() -> int:
    args = _arguments()
    tolerances = sorted(float(x) for x in harness.names(args.tolerances))
    faults = harness.names(args.faults) if args.faults else []
    unknown = [f for f in faults if f not in OTHER_FAULTS]
    if unknown:
        print(
            f"unknown fault(s) {', '.join(unknown)}: choose from {', '.join(OTHER_FAULTS)}", file=sys.stderr
        )
        return 2
    db = harness.result_db(args.db, "detection_floor.db")
    db.parent.mkdir(parents=True, exist_ok=True)
    _register_plugins(db.parent / "plugins")
    from workbench.store import Store

    host_before = _host()
    started = time.monotonic()
    draft = _draft(db.parent, args.draft_layers)
    with Store(db) as store:
        result = harness.run_spec(_spec(args, draft, tolerances, faults), store)
        figures = _figures(store, result.run_id, tolerances, faults)
    figures.update(
        {
            "model": DEMO_MODEL,
            "dtype": "bfloat16",
            "device": args.device,
            "workloads": harness.names(args.workloads),
            "limit": args.limit,
            "max_new_tokens": args.max_new_tokens,
            "draft_layers": args.draft_layers,
            "k": args.k,
            "run_status": result.status,
            "seconds": round(time.monotonic() - started, 1),
            "host_before": host_before,
            "host_after": _host(),
        }
    )
    _print(figures)
    out = args.json or db.parent / "detection_floor.json"
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    host = figures["host_after"]
    print(
        f"\nhost: {host['cpus']} CPUs, flags {' '.join(host['cpu_flags'])}; load before {host_before['load']}, after {host['load']}"
    )
    print(f"{figures['seconds']:.0f} s; database {db}; figures {out}\n")
    honest = figures["rows"][0]
    problems = [
        f"planted fault {f} changed an output and was called equivalent" for f in figures["faults_missed"]
    ]
    problems += [
        f"the honest {r['variant']} is {r['status']}: {r['words']}"
        for r in figures["rows"][1:]
        if r["outcome"] == "honest" and r["status"] not in ("identical", "equivalent")
    ]
    if result.status != "ok":
        problems.append(f"the run ended {result.status}: {result.errors}")
    if honest["status"] not in ("identical", "equivalent"):
        problems.append(f"the honest speculative variant is {honest['status']}: {honest['words']}")
    if figures["detection_floor_nats"] is None:
        problems.append("no tolerance was caught")
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
