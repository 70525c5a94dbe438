"""Two runs compared: variants matched by name (before and after a driver or library upgrade), RUN_B's
speed-ups over RUN_A with bootstrap CIs.

:func:`compare_two_runs` is the one entry for two runs: ``workbench compare A B`` (text, ``--json``,
``--out``) and the GUI's compare view all call it, so they show the same numbers. Disturbed trials
follow one rule: each run's own (:func:`workbench.analysis.paired.disturbance`, the default of
``--exclude-disturbed/--include-disturbed``: left out when few). Two runs cannot be paired round by
round (the machine may have changed between them), so a speed-up across runs is a ratio of medians
with a bootstrap CI stratified by prompt, not the paired estimate of one run.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from workbench.analysis.groups import run_groups
from workbench.analysis.paired import Disturbance, disturbance, usable
from workbench.analysis.stats import Estimate, bootstrap_median
from workbench.analysis.summary import METRICS, GroupSummary, prompt_keys, unpaired_speedup
from workbench.analysis.targets import Verdict
from workbench.analysis.verdict import Trust, WorkloadVerdict, trust, workload_verdicts
from workbench.core.errors import WorkbenchError
from workbench.spec.parse import recorded_spec, recorded_targets
from workbench.store.loaded import LoadedRun, ServerWindowRecord
from workbench.store.records import RunRecord, TrialRecord, VariantRecord

__all__ = [
    "KERNEL_FIELDS",
    "MergedRuns",
    "RunComparison",
    "RunDifference",
    "SideBySide",
    "TwoRuns",
    "Unmatched",
    "compare_runs",
    "compare_two_runs",
    "merge_runs",
    "run_differences",
    "side_by_side",
]


@dataclass(frozen=True)
class RunComparison:
    """One variant × workload measured in two runs (matched by name): RUN_B against RUN_A."""

    variant: str
    workload: str
    run_a: int
    run_b: int
    a: Mapping[str, Estimate]  # e2e_ms, ttft_ms, tpot_ms, decode_tokens_per_s medians in RUN_A
    b: Mapping[str, Estimate]
    speedup_e2e: Estimate | None  # A e2e / B e2e: > 1 when RUN_B is faster
    speedup_ttft: Estimate | None
    speedup_decode: Estimate | None  # B decode tok/s / A decode tok/s

    @property
    def significant(self) -> bool | None:
        est = self.speedup_e2e
        if est is None or est.lo is None or est.hi is None:
            return None
        return not (est.lo <= 1.0 <= est.hi)

    @property
    def change(self) -> str | None:
        """The e2e verdict: ``faster`` / ``slower`` (RUN_B's CI excludes 1 on that side), ``unchanged``
        (the CI includes 1: no detectable change) or None (no interval: too few trials)."""
        significant = self.significant
        if significant is None:
            return None
        if not significant:
            return "unchanged"
        assert self.speedup_e2e is not None and self.speedup_e2e.value is not None
        return "faster" if self.speedup_e2e.value > 1 else "slower"

    def to_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "a": {k: v.to_dict() for k, v in self.a.items()},
            "b": {k: v.to_dict() for k, v in self.b.items()},
            "speedup_e2e": self.speedup_e2e.to_dict() if self.speedup_e2e else None,
            "speedup_ttft": self.speedup_ttft.to_dict() if self.speedup_ttft else None,
            "speedup_decode": self.speedup_decode.to_dict() if self.speedup_decode else None,
            "significant": self.significant,
            "change": self.change,
        }


_COMPARED = ("e2e_ms", "ttft_ms", "tpot_ms", "decode_tokens_per_s")


def compare_runs(
    trials_a: Sequence[TrialRecord], trials_b: Sequence[TrialRecord], run_a: int, run_b: int
) -> tuple[list[RunComparison], list[Unmatched]]:
    """Variants matched by name across two runs (e.g. before and after a driver or library upgrade),
    per workload both ran: RUN_B's speed-ups over RUN_A with bootstrap CIs (stratified by prompt).
    Returns the comparisons and the variants found in only one run (with that run)."""

    def groups(trials: Sequence[TrialRecord]) -> dict[tuple[str, str], list[TrialRecord]]:
        out: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
        for t in trials:
            if t.status == "ok" and not t.warmup:
                out[(t.variant, t.workload)].append(t)
        return out

    ga, gb = groups(trials_a), groups(trials_b)
    results = []
    for key, rows_a in ga.items():
        rows_b = gb.get(key)
        if not rows_b:
            continue
        pa, pb = prompt_keys(rows_a), prompt_keys(rows_b)

        def col(rows: list[TrialRecord], name: str) -> list[float | None]:
            return [getattr(r, name) for r in rows]

        results.append(
            RunComparison(
                variant=key[0],
                workload=key[1],
                run_a=run_a,
                run_b=run_b,
                a={m: bootstrap_median(col(rows_a, m), pa) for m in _COMPARED},
                b={m: bootstrap_median(col(rows_b, m), pb) for m in _COMPARED},
                speedup_e2e=_across(rows_a, rows_b, "e2e_ms"),
                speedup_ttft=_across(rows_a, rows_b, "ttft_ms"),
                speedup_decode=_across(rows_a, rows_b, "decode_tokens_per_s"),
            )
        )
    return results, _unmatched(trials_a, trials_b, run_a, run_b)


def _across(rows_a: Sequence[TrialRecord], rows_b: Sequence[TrialRecord], metric: str) -> Estimate | None:
    """RUN_B's speed-up over RUN_A on ``metric``: a ratio of medians, each run resampled on its own
    (:func:`~workbench.analysis.summary.unpaired_speedup`, what the runs side by side show too)."""
    est = unpaired_speedup(rows_a, rows_b, metric, higher_is_better=METRICS[metric].higher_is_better)
    return None if est is None else Estimate(est.value, est.lo, est.hi, est.n)


def _unmatched(
    trials_a: Sequence[TrialRecord], trials_b: Sequence[TrialRecord], run_a: int, run_b: int
) -> list[Unmatched]:
    """The variants only one of two runs has, RUN_A's first, each with the run that has it."""
    names_a, names_b = {t.variant for t in trials_a}, {t.variant for t in trials_b}
    return [Unmatched(n, run_a) for n in sorted(names_a - names_b)] + [
        Unmatched(n, run_b) for n in sorted(names_b - names_a)
    ]


class Unmatched(NamedTuple):
    """A variant only one of two runs has, and that run."""

    variant: str
    run: int


@dataclass(frozen=True)
class MergedRuns:
    """One run's records, or several runs' side by side: with more than one run every variant name
    carries its run (``"3:baseline"``), so same-named variants of two runs stay apart."""

    runs: tuple[RunRecord, ...]
    variants: tuple[VariantRecord, ...]  # names tagged
    trials: tuple[TrialRecord, ...]  # every trial, warm-ups included (flagged), names tagged
    windows: tuple[ServerWindowRecord, ...]  # server_metrics rows, names tagged
    baseline: str | None  # the reference variant (tagged); None when the runs have none of that name
    failures: tuple[str, ...] = ()  # variants that crashed or failed to load


def merge_runs(runs: Sequence[LoadedRun], baseline: str | None = None, *, strict: bool = False) -> MergedRuns:
    """``runs`` (their rows, :meth:`workbench.store.Store.load_run`) as one record set. ``baseline``: a
    variant name, as ``RUN:variant`` or just ``variant`` for the first run's; by default the first
    run's baseline. ``strict``: a baseline no trial has is an error (the CLI), else it is dropped (the
    GUI)."""
    tagged = len(runs) > 1

    def tag(run: LoadedRun, name: str) -> str:
        return f"{run.id}:{name}" if tagged else name

    variants: list[VariantRecord] = []
    failures: list[str] = []
    trials: list[TrialRecord] = []
    windows: list[ServerWindowRecord] = []
    for run in runs:
        for v in run.variants:
            variants.append(dataclasses.replace(v, name=tag(run, v.name)))
            if v.status == "failed" and v.error:
                failures.append(f"{tag(run, v.name)}: {v.error}")
        every = sorted([*run.trials, *run.warmups], key=lambda t: t.id or 0)  # as recorded
        trials += [dataclasses.replace(t, variant=tag(run, t.variant)) for t in every] if tagged else every
        windows += [dataclasses.replace(w, variant=tag(run, w.variant)) for w in run.server_windows]
    if baseline is None and runs:
        baseline = runs[0].run.baseline
        if baseline:
            baseline = tag(runs[0], baseline)
    elif baseline is not None and tagged and ":" not in baseline:
        baseline = tag(runs[0], baseline)
    names = {t.variant for t in trials}
    if baseline is not None and trials and baseline not in names:
        if strict:
            raise WorkbenchError(
                f"baseline variant {baseline!r} not in the run; variants: {', '.join(sorted(names))}"
            )
        baseline = None
    return MergedRuns(
        tuple(r.run for r in runs), tuple(variants), tuple(trials), tuple(windows), baseline, tuple(failures)
    )


@dataclass(frozen=True)
class SideBySide:
    """Runs side by side (``compare A B --baseline V``: against one baseline variant; the GUI's view of
    two runs: each run against its own): every variant name carries its run (``"3:baseline"``); each
    run's rows are the ones it has alone; speed-ups are paired only within a run (across runs: ratios
    of medians, each run resampled on its own). Built once by :func:`side_by_side`."""

    runs: tuple[RunRecord, ...]
    variants: tuple[VariantRecord, ...]  # names tagged
    trials: tuple[TrialRecord, ...]  # every trial, warm-ups included (flagged), names tagged
    baseline: str | None
    failures: tuple[str, ...]  # variants that crashed or failed to load, with the reason
    summaries: tuple[GroupSummary, ...]  # quality attached (each run's pass, names tagged)
    verdicts: tuple[Verdict, ...]  # experience targets (each run's against its own spec's, as alone)
    workload_verdicts: tuple[WorkloadVerdict, ...]
    trust: Trust

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


def side_by_side(
    runs: Sequence[LoadedRun],
    baseline: str | None = None,
    *,
    exclude_disturbed: bool | None = None,
    strict: bool = False,
    each_alone: bool = False,
) -> SideBySide:
    """Runs (their rows) side by side against ``baseline`` (see :func:`merge_runs`; ``strict``: a
    baseline no trial has is an error). Each run's rows are the rows it has alone
    (:func:`workbench.analysis.groups.run_groups`: its own disturbed-trial rule and targets, its
    speed-ups paired within it); a variant of another run than the baseline's gets its speed-ups as
    ratios of medians, each run resampled on its own (two runs are never paired). ``each_alone``:
    every run against its own baseline instead, exactly as it is shown alone (the GUI's compare view:
    what holds across the runs is :func:`compare_two_runs`'s); ``baseline`` is then ignored."""
    merged = merge_runs(runs, None if each_alone else baseline, strict=strict)
    chosen = None if each_alone else merged.baseline
    tagged = len(runs) > 1
    base_run, _, base_name = (chosen or "").rpartition(":") if tagged else ("", "", chosen)
    summaries: list[GroupSummary] = []
    verdicts: list[Verdict] = []
    base_rows: dict[str, list[TrialRecord]] = defaultdict(list)  # the baseline's used trials per workload
    across: dict[int, list[TrialRecord]] = {}  # rows of other runs (by position), with their used trials
    for run in runs:
        trials = run.trials
        own = each_alone or not tagged or str(run.id) == base_run  # paired within the run
        reference = run.run.baseline if each_alone else base_name
        groups = run_groups(
            run,
            reference if own and reference in {t.variant for t in trials} else None,
            recorded_targets(run.run.spec or ""),
            exclude_disturbed=exclude_disturbed,
        )
        used: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
        for t in usable(trials, exclude_disturbed):
            used[(t.variant, t.workload)].append(t)
            if own and not each_alone and t.variant == base_name:
                base_rows[t.workload].append(t)
        for summary in groups.summaries:
            if not own and chosen is not None:
                across[len(summaries)] = used[(summary.variant, summary.workload)]
            summaries.append(
                dataclasses.replace(summary, variant=f"{run.id}:{summary.variant}") if tagged else summary
            )
        verdicts += [
            dataclasses.replace(v, variant=f"{run.id}:{v.variant}") if tagged else v for v in groups.verdicts
        ]
    for index, mine in across.items():  # against another run's baseline: never paired
        summary = summaries[index]
        base = base_rows.get(summary.workload)
        if not base or not mine:
            continue
        e2e = unpaired_speedup(base, mine, "e2e_ms", higher_is_better=False)
        summaries[index] = dataclasses.replace(
            summary,
            speedup_e2e=e2e,
            speedup_ttft=unpaired_speedup(base, mine, "ttft_ms", higher_is_better=False),
            speedup_decode=unpaired_speedup(base, mine, "decode_tokens_per_s", higher_is_better=True),
            significant=None
            if e2e is None or e2e.lo is None or e2e.hi is None
            else not e2e.lo <= 1 <= e2e.hi,
        )
    return SideBySide(
        runs=merged.runs,
        variants=merged.variants,
        trials=merged.trials,
        baseline=chosen,
        failures=merged.failures,
        summaries=tuple(summaries),
        verdicts=tuple(verdicts),
        workload_verdicts=tuple(workload_verdicts(summaries, chosen)),
        trust=trust(summaries, chosen),
    )


@dataclass(frozen=True)
class RunDifference:
    """One way two runs differ: ``kind`` machine | libraries | spec | variant, ``name`` what
    (``cpu``, ``torch``, ``repetitions``, ``slow: params``), and its value in each run (None: absent)."""

    kind: str
    name: str
    a: object
    b: object

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @property
    def changes_kernels(self) -> bool:
        """Whether this difference decides which kernels run (:data:`KERNEL_FIELDS`; a variant's
        own library counts as its library): it can explain a changed verdict by itself."""
        name = self.name.split(": ", 1)[-1] if self.kind == "libraries" else self.name
        return (self.kind, name) in KERNEL_FIELDS


#: the machine's fields compared between two runs (the ``host`` part of ``runs.environment``)
_HOST_FIELDS = (
    "host",
    "cpu",
    "cpu_flags",
    "cpu_count",
    "memory_gb",
    "gpu",
    "gpu_memory_gb",
    "gpu_capability",
    "cuda_driver",
    "gpu_sm_clock_max_mhz",
    "gpu_app_sm_clock_mhz",
    "gpu_power_limit_w",
    "matmul_precision",
    "tf32_matmul",
    "device",
    "os",
    "python",
    "torch_threads",
)
_KERNEL_LIBRARIES = ("torch", "transformers", "torchao", "bitsandbytes", "gptqmodel", "triton",
                     "llama-cpp-python", "onnxruntime", "onnxruntime-gpu", "onnxruntime-genai",
                     "onnxruntime-genai-cuda")  # fmt: skip
#: what decides which kernels run: a difference in one of these can explain a changed verdict by
#: itself (the CPU's instruction set, the GPU, its driver and clocks, float32 matmul precision, and
#: the libraries whose kernels the strategies call)
KERNEL_FIELDS = frozenset(
    {
        ("machine", "cpu_flags"),
        ("machine", "gpu"),
        ("machine", "gpu_capability"),
        ("machine", "cuda_driver"),
        ("machine", "gpu_sm_clock_max_mhz"),
        ("machine", "gpu_app_sm_clock_mhz"),
        ("machine", "gpu_power_limit_w"),
        ("machine", "matmul_precision"),
        ("machine", "tf32_matmul"),
        *(("libraries", lib) for lib in _KERNEL_LIBRARIES),
    }
)
#: a variant's recorded settings compared between two runs (``variants`` columns)
_VARIANT_FIELDS = (
    "strategy",
    "model",
    "dtype",
    "device",
    "params",
    "python",
    "threads",
    "batch_size",
    "concurrency",
)


def _host(run: RunRecord) -> dict[str, object]:
    host = _json_dict(run.environment).get("host")
    return _as_dict(host)


def _as_dict(found: object) -> dict[str, object]:
    return {str(k): v for k, v in found.items()} if isinstance(found, dict) else {}


def _json_dict(text: str | None) -> dict[str, object]:
    import json

    try:
        found: object = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return _as_dict(found)


def _spec_tables(text: str | None) -> dict[str, object]:
    """A recorded spec's top-level keys and its workloads' keys by name (``{}`` when it does not
    parse: an old run, or none recorded). Variants are compared on their recorded rows instead."""
    data = recorded_spec(text)
    out: dict[str, object] = {k: v for k, v in data.items() if k not in ("variants", "workloads", "name")}
    for table in data.get("workloads") or []:
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            out[f"workload {table['name']}"] = "in the spec"
            for key, value in table.items():
                if key != "name":
                    out[f"workload {table['name']}: {key}"] = value
    return out


def run_differences(
    run_a: RunRecord,
    run_b: RunRecord,
    variants_a: Sequence[VariantRecord] = (),
    variants_b: Sequence[VariantRecord] = (),
) -> list[RunDifference]:
    """How two runs differ (their runs rows, and their variants rows): the machine, the libraries (the
    workbench's and each matched variant's worker's), the spec (its top-level keys and workloads) and
    each same-named variant's recorded settings (strategy, model, dtype, device, each parameter…).
    Facts only; the report words them."""
    out: list[RunDifference] = []
    ha, hb = _host(run_a), _host(run_b)
    if ha and hb:
        for key in _HOST_FIELDS:
            if ha.get(key) != hb.get(key):
                out.append(RunDifference("machine", key, ha.get(key), hb.get(key)))
        pa, pb = _as_dict(ha.get("packages")), _as_dict(hb.get("packages"))
        for name in dict.fromkeys([*pa, *pb]):
            if pa.get(name) != pb.get(name):
                out.append(RunDifference("libraries", name, pa.get(name), pb.get(name)))
    by_name = {v.name: v for v in variants_b}
    host_a, host_b = _as_dict(ha.get("packages")), _as_dict(hb.get("packages"))
    for va in variants_a:
        vb = by_name.get(va.name)
        if vb is None:
            continue
        name = va.name
        for key in _VARIANT_FIELDS:
            if key == "params":  # the strategy's parameters one by one
                xa, xb = _json_dict(va.params), _json_dict(vb.params)
                for param in dict.fromkeys([*xa, *xb]):
                    if xa.get(param) != xb.get(param):
                        out.append(RunDifference("variant", f"{name}: {param}", xa.get(param), xb.get(param)))
            elif getattr(va, key) != getattr(vb, key):
                out.append(RunDifference("variant", f"{name}: {key}", getattr(va, key), getattr(vb, key)))
        ka, kb = _json_dict(va.packages), _json_dict(vb.packages)
        for lib in dict.fromkeys([*ka, *kb]) if ka and kb else ():
            # a worker in the workbench's own environment: the difference is the host's, listed above
            same_as_host = (ka.get(lib), kb.get(lib)) == (host_a.get(lib), host_b.get(lib))
            if ka.get(lib) != kb.get(lib) and not same_as_host:
                out.append(RunDifference("libraries", f"{name}: {lib}", ka.get(lib), kb.get(lib)))
    sa, sb = _spec_tables(run_a.spec), _spec_tables(run_b.spec)
    if sa or sb:
        for key in dict.fromkeys([*sa, *sb]):
            if sa.get(key) != sb.get(key):
                out.append(RunDifference("spec", key, sa.get(key), sb.get(key)))
    return out


@dataclass(frozen=True)
class TwoRuns:
    """Two runs compared (:func:`compare_two_runs`): RUN_B against RUN_A, variants matched by name.
    Built once; ``workbench.report.comparison`` words it and writes its JSON."""

    run_a: RunRecord
    run_b: RunRecord
    comparisons: tuple[RunComparison, ...]
    unmatched: tuple[Unmatched, ...]  # variants only one of the runs has
    disturbed: tuple[Disturbance, Disturbance]  # each run's own rule: (RUN_A's, RUN_B's)
    differences: tuple[RunDifference, ...] = ()
    #: what could not be compared and why: (variant, workload or None for the whole variant, reason)
    not_compared: tuple[tuple[str, str | None, str], ...] = ()
    #: every variant name of both runs in run order (RUN_A's spec order, then RUN_B's new ones): what
    #: fixes each variant's colour, the same as the runs' side by side
    variant_names: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[int, int]:
        return self.run_a.id, self.run_b.id


def compare_two_runs(run_a: LoadedRun, run_b: LoadedRun, *, exclude_disturbed: bool | None = None) -> TwoRuns:
    """RUN_B against RUN_A (their rows), variants matched by name: the one computation behind ``compare
    A B`` (text, ``--json``, ``--out``) and the GUI's compare view. ``exclude_disturbed``: None is the
    default rule, applied to each run on its own (few disturbed trials: left out)."""
    for loaded in (run_a, run_b):  # the store is read by its loader, never by analysis
        if not isinstance(loaded, LoadedRun):
            raise TypeError(f"compare_two_runs takes LoadedRun (Store.load_run), not {type(loaded).__name__}")
    trials_a, trials_b = run_a.trials, run_b.trials
    rules = (disturbance(trials_a, exclude_disturbed), disturbance(trials_b, exclude_disturbed))
    comparisons, unmatched = compare_runs(
        usable(trials_a, exclude_disturbed),
        usable(trials_b, exclude_disturbed),
        run_a.id,
        run_b.id,
    )
    # names only one run has at all (usable() may drop a variant whose every trial failed)
    ids = run_a.id, run_b.id
    names = {t.variant for t in trials_a}, {t.variant for t in trials_b}
    unmatched = _unmatched(trials_a, trials_b, *ids)
    not_compared: list[tuple[str, str | None, str]] = [
        (n, None, f"only in run {ids[side]}")
        for side in (0, 1)
        for n in sorted(names[side] - names[1 - side])
    ]
    keys = [dict.fromkeys((t.variant, t.workload) for t in trials) for trials in (trials_a, trials_b)]
    done = {(c.variant, c.workload) for c in comparisons}
    for key in dict.fromkeys([*keys[0], *keys[1]]):
        variant, workload = key
        if key in done or variant not in names[0] & names[1]:
            continue
        if key not in keys[1] or key not in keys[0]:
            why = f"the workload ran only in run {ids[0] if key in keys[0] else ids[1]}"
        else:
            empty = [
                str(i)
                for i, trials in zip(ids, (trials_a, trials_b), strict=True)
                if not any(t.status == "ok" and (t.variant, t.workload) == key for t in trials)
            ]
            why = (
                f"no finished trials in run {' or '.join(empty)}"
                if empty
                else "every finished trial was left out as disturbed"
            )
        not_compared.append((variant, workload, why))
    rows_a, rows_b = run_a.variants, run_b.variants
    order = list(dict.fromkeys([*(v.name for v in rows_a), *(v.name for v in rows_b)]))
    order += [n for n in sorted(names[0] | names[1]) if n not in order]
    workloads = list(dict.fromkeys(t.workload for t in [*trials_a, *trials_b]))
    # in the runs' order (variants as in the spec, workloads as they ran), not in the trials' order
    comparisons.sort(key=lambda c: (order.index(c.variant), workloads.index(c.workload)))
    differences = run_differences(run_a.run, run_b.run, rows_a, rows_b)
    return TwoRuns(
        run_a.run,
        run_b.run,
        tuple(comparisons),
        tuple(unmatched),
        rules,
        tuple(differences),
        tuple(not_compared),
        tuple(order),
    )
