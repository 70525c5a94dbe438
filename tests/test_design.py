"""The run's design: the balanced order of variants within rounds, interleaved execution
through real worker processes, counterbalanced blocks, paired speed-ups, disturbed trials, drift,
and repetitions = "auto" — with a fake machine that drifts, so that the old sequential order shows the
false finding it used to report and the interleaved, paired design does not."""

from __future__ import annotations

import collections
import itertools
import math
import time

import pytest

from workbench.analysis.paired import (
    disturbance,
    drift,
    mde_with,
    pair_values,
    paired_speedup,
    pairs_needed,
    usable,
)
from workbench.analysis.run import analyze_run
from workbench.analysis.stats import t_quantile
from workbench.core.errors import SpecError
from workbench.report.design import design_lines, disturbance_line
from workbench.run import preflight
from workbench.run.design import balanced_orders, block_schedule, interleaved_schedule, row_for_round
from workbench.run.disturbance import MachineWatch, judge
from workbench.run.execute import RunExecutor
from workbench.run.plan import plan_run
from workbench.spec.parse import parse_spec
from workbench.store import Store, TrialRecord


def two_fakes(
    *,
    reps: int = 6,
    order: str = "interleaved",
    a: str = "",
    b: str = "",
    top: str = "",
    limit: int = 4,
    tokens: int = 10,
    b_decode: float = 2,
) -> str:
    return f"""
name = "design"
repetitions = {reps}
warmup = 1
order = "{order}"
{top}
[[variants]]
name = "A"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 2
{a}
[[variants]]
name = "B"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = {b_decode}
{b}
[[workloads]]
name = "code"
limit = {limit}
max_new_tokens = {tokens}
"""


# -- the order within rounds ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_balanced_orders_put_every_variant_first_and_after_every_other_equally_often(n):
    rows = balanced_orders(n, seed=7)
    assert all(sorted(row) == list(range(n)) for row in rows)
    for position in range(n):
        counts = collections.Counter(row[position] for row in rows)
        assert len(set(counts.values())) == 1 and len(counts) == n
    follows = collections.Counter(pair for row in rows for pair in itertools.pairwise(row))
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1
    assert balanced_orders(n, seed=7) == rows  # seeded


def test_rows_go_forth_and_back_over_the_rounds():
    assert [row_for_round(m, 2) for m in range(8)] == [0, 1, 1, 0, 0, 1, 1, 0]
    assert [row_for_round(m, 3) for m in range(6)] == [0, 1, 2, 2, 1, 0]


def test_interleaved_schedule_runs_warmups_first_then_every_variant_once_per_round():
    spec = parse_spec(two_fakes(reps=3) + '[[variants]]\nname = "C"\nstrategy = "fake"\n')
    plans = plan_run(spec)
    warm, rounds = interleaved_schedule(plans, spec.seed)
    assert [u.variant for u in warm] == [0, 1, 2] and all(u.round is None for u in warm)
    by_round = collections.defaultdict(list)
    for unit in rounds:
        by_round[unit.round].append(unit.variant)
    assert len(by_round) == 3 * 4
    assert all(sorted(v) == [0, 1, 2] for v in by_round.values())
    firsts = collections.Counter(v[0] for v in by_round.values())
    assert set(firsts) == {0, 1, 2}  # no variant always first
    # a round's units all run the same (workload, prompt, repetition)
    for unit in rounds:
        trial = plans[unit.variant].trials[unit.trials[0]]
        assert trial.round == unit.round


def test_blocks_alternate_abba_and_share_a_load_across_a_pass_boundary():
    spec = parse_spec(two_fakes(reps=4, order="blocks"))
    plans = plan_run(spec)
    blocks = block_schedule(plans, spec.seed)
    first = blocks[0].variant
    other = 1 - first
    assert [b.variant for b in blocks] == [first, other, first, other, first][: len(blocks)]
    assert len(blocks) == 3 or len(blocks) == 5
    for block in blocks:  # each load warms up first
        trials = [plans[block.variant].trials[i] for u in block.units for i in u.trials]
        assert trials[0].warmup
    repetitions = [
        sorted({plans[b.variant].trials[u.trials[0]].repetition for u in b.units if u.round is not None})
        for b in blocks
    ]
    assert repetitions[0] == [0] and repetitions[1] == [0, 1]  # A | B B | A A | B


# -- paired statistics ---------------------------------------------------------------------------


def test_a_constant_ratio_is_recovered_exactly_and_noise_sets_the_detectable_effect():
    est = paired_speedup([110.0] * 8, [100.0] * 8, ["p"] * 8, higher_is_better=False)
    assert est.value == pytest.approx(1.1) and est.lo == pytest.approx(1.1) and est.mde == 0.0
    rng = __import__("numpy").random.default_rng(1)
    base = 100 * rng.lognormal(0, 0.05, 400)
    small = paired_speedup(base[:100], base[:100] / 1.05, ["p"] * 100, higher_is_better=False)
    noisy = paired_speedup(
        base[:100], (base / 1.05 * rng.lognormal(0, 0.05, 400))[:100], ["p"] * 100, higher_is_better=False
    )
    assert small.value == pytest.approx(1.05)
    assert noisy.lo < 1.05 < noisy.hi and noisy.mde > 0.01
    many = paired_speedup(
        base, base / 1.05 * rng.lognormal(0, 0.05, 400), ["p"] * 400, higher_is_better=False
    )
    # 4x the pairs: half the detectable effect (the normal path above NORMAL_FROM pairs)
    assert many.mde == pytest.approx(noisy.mde / 2, rel=0.25)


def test_the_normal_path_agrees_with_the_bootstrap_at_the_switch():
    import numpy as np

    rng = np.random.default_rng(3)
    a = 100 * rng.lognormal(0, 0.1, 400)
    b = a * rng.lognormal(0, 0.1, 400)
    strata = [f"p{i % 8}" for i in range(400)]
    normal = paired_speedup(a, b, strata, higher_is_better=False)
    boot = paired_speedup(a[:399], b[:399], strata[:399], higher_is_better=False)
    assert normal.lo == pytest.approx(boot.lo, abs=0.004) and normal.hi == pytest.approx(boot.hi, abs=0.004)


def test_one_pair_per_prompt_gives_no_interval():
    est = paired_speedup([10.0, 20.0, 30.0], [9.0, 19.0, 28.0], ["a", "b", "c"], higher_is_better=False)
    assert est.value > 1 and est.lo is None and est.mde is None and est.half_width is None


def test_pairs_from_several_processes_are_clustered_on_them():
    # Three process pairs; inside each the pairs agree to 0.1 %, but the processes differ by ±5 %:
    # the pairs alone would call that significant, the process pairs are what varies.
    d = [0.05, -0.05, 0.0]
    ref, var, strata, clusters = [], [], [], []
    for c, shift in enumerate(d):
        for p in range(4):
            for jitter in (0.999, 1.001):
                ref.append(100.0)
                var.append(100.0 * math.exp(shift) * jitter)
                strata.append(f"p{p}")
                clusters.append((c, c))
    plain = paired_speedup(ref, var, strata, higher_is_better=True)
    assert plain.clusters is None and (plain.lo > 1 or plain.hi < 1 or plain.half_width < 0.05)
    est = paired_speedup(ref, var, strata, higher_is_better=True, clusters=clusters)
    assert est.clusters == 3 and est.lo < 1 < est.hi
    assert est.value == pytest.approx(1.0, abs=1e-3)
    # cluster-robust SE of the mean of (0.05, -0.05, 0) with G/(G-1): sqrt(1.5 * 0.005) / 3
    se = math.sqrt(1.5 * 0.005) / 3
    assert math.log(est.hi) == pytest.approx(4.303 * se, rel=1e-3)
    assert est.mde == pytest.approx(math.exp((4.303 + 1.061) * se) - 1, rel=1e-3)
    # more repetitions (clusters) shrink both the standard error and the t quantiles
    assert mde_with(est, est.n) == pytest.approx(est.mde)
    assert mde_with(est, 4 * est.n) < est.mde / 2 / 1.5
    needed = pairs_needed(est, 0.05)
    assert needed is not None and mde_with(est, needed) <= 0.05 < mde_with(est, needed - 8)
    # one process pair, or a run that does not say (older runs): the pairs' own interval
    assert paired_speedup(ref, var, strata, higher_is_better=True, clusters=[(0, 0)] * len(ref)) == plain
    assert paired_speedup(ref, var, strata, higher_is_better=True, clusters=[None] * len(ref)) == plain


def test_t_quantiles_match_the_table_and_the_expansion_beyond_it():
    assert t_quantile(0.975, 1) == 12.706 and t_quantile(0.8, 2) == 1.061
    assert t_quantile(0.975, 60) == pytest.approx(2.0003, abs=1e-3)
    assert t_quantile(0.8, 120) == pytest.approx(0.8446, abs=1e-3)
    assert t_quantile(0.975, 10**6) == pytest.approx(1.95996, abs=1e-4)


def test_pairs_match_prompt_and_repetition_and_skip_missing_values():
    ref = [
        TrialRecord.from_row({"workload": "w", "prompt_id": "p", "repetition": r, "e2e_ms": 10.0 + r})
        for r in range(3)
    ]
    var = [
        TrialRecord.from_row({"workload": "w", "prompt_id": "p", "repetition": 2, "e2e_ms": 6.0}),
        TrialRecord.from_row({"workload": "w", "prompt_id": "p", "repetition": 0, "e2e_ms": 5.0}),
        TrialRecord.from_row({"workload": "w", "prompt_id": "p", "repetition": 1, "e2e_ms": None}),
    ]
    assert pair_values(ref, var, "e2e_ms") == ([12.0, 10.0], [6.0, 5.0], ["p", "p"])


def test_disturbed_trials_are_left_out_only_when_few_and_spread():
    def rows(bad_a, bad_b, n=10):
        return [
            TrialRecord.from_row(
                {"variant": v, "status": "ok", "disturbed": int(i < bad), "disturbance": "waited"}
            )
            for v, bad in (("A", bad_a), ("B", bad_b))
            for i in range(n)
        ]

    few = rows(2, 1)  # 3 of 20: out
    assert disturbance(few).excluded and len(usable(few)) == 17
    many = rows(3, 3)  # 6 of 20 is over a quarter: kept, and said
    rule = disturbance(many)
    assert not rule.excluded and "kept in the speed-ups" in disturbance_line(rule)
    assert disturbance(many, exclude=True).excluded and len(usable(many, True)) == 14
    # a variant disturbed most of the time disturbs itself (more threads than cores): kept, although
    # its 6 disturbed trials are only 6 % of the run's 100
    others = [
        TrialRecord.from_row({"variant": v, "status": "ok", "disturbed": 0})
        for v in "CDEFGHIJ"
        for _ in range(10)
    ]
    assert not disturbance(rows(0, 6) + others).excluded


def test_judge_flags_waiting_for_a_cpu_and_a_clock_drop():
    assert judge(TrialRecord(cpu_ms=100.0, cpu_wait_ms=2.0)) is None
    assert "waited 30 ms" in judge(TrialRecord(cpu_ms=100.0, cpu_wait_ms=30.0))
    assert judge(TrialRecord(cpu_ms=10.0, cpu_wait_ms=3.0)) is None  # under the 5 ms floor
    assert "GPU clock 1500 MHz" in judge(TrialRecord(gpu_clock_mhz=1500), best_clock_mhz=1980)
    assert judge(TrialRecord(gpu_clock_mhz=1900), best_clock_mhz=1980) is None


def test_the_watch_sees_cpu_time_and_on_linux_the_wait():
    watch = MachineWatch()
    mark = watch.mark()
    t = time.perf_counter()
    while time.perf_counter() - t < 0.05:
        pass
    figures = watch.figures(mark)
    assert figures["cpu_ms"] > 20
    if __import__("sys").platform.startswith("linux"):
        assert figures["cpu_wait_ms"] is not None and figures["cpu_wait_ms"] >= 0


def test_drift_compares_the_last_rounds_with_the_first_per_prompt():
    rows = [
        TrialRecord(
            variant="A",
            status="ok",
            workload="w",
            prompt_id=p,
            repetition=r,
            round=2 * r + i,
            e2e_ms=(10.0 if p == "a" else 50.0) * (1 + 0.1 * r),
        )
        for r in range(4)
        for i, p in enumerate("ab")
    ]
    assert drift(rows, "A") == pytest.approx(1.3 / 1.0, rel=0.01)
    assert drift(rows[:4], "A") == pytest.approx(1.1, rel=0.01)
    assert drift(rows[:2], "A") is None


# -- through real workers --------------------------------------------------------------------------


def run(text, db_path):
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    return store, result


def speedups(store, run_id, **kwargs):
    (s,) = [s for s in analyze_run(store.load_run(run_id), **kwargs).summaries if s.variant == "B"]
    return s


@pytest.mark.slow
def test_a_drifting_machine_fools_the_sequential_order_not_the_interleaved_one(tmp_path):
    # Costs grow 20 % per second from now on: identical variants, one after the other, look different.
    drifting = f"drift_per_s = 0.2\ndrift_from = {time.time()}"
    store, result = run(two_fakes(order="sequential", a=drifting, b=drifting), tmp_path / "seq.db")
    assert result.status == "ok"
    seq = speedups(store, result.run_id)
    assert seq.significant and seq.speedup_e2e.value < 0.92  # B ran later, on a "slower machine"
    assert analyze_run(store.load_run(result.run_id)).design.order == "sequential"

    drifting = f"drift_per_s = 0.2\ndrift_from = {time.time()}"
    store, result = run(two_fakes(a=drifting, b=drifting), tmp_path / "int.db")
    inter = speedups(store, result.run_id)
    est = inter.speedup_e2e
    # No bias beyond the noise. On a busy machine the fake's trials carry random noise too, and a
    # 95 % CI of an A/A pair excludes 1 in 5 % of runs by definition (what ab_noise.py counts);
    # the test asks the 99.9 % interval (3.29 standard errors) so that it fails only on a bias. On a
    # quiet machine the fake is exact to microseconds (CI ±0.006 % in CI's run), and the balanced
    # order leaves a second-order residual of the drift (its cost of going second shrinks as
    # 1/(1 + 0.2 t): 0.013 % measured): a bias of no size, 600x below the sequential one, allowed.
    se = math.log(est.hi / est.lo) / (2 * 1.96)
    assert est.method == "paired" and abs(math.log(est.value)) < max(3.29 * se, 0.001), est
    assert abs(est.value - 1) < 0.03
    design = analyze_run(store.load_run(result.run_id)).design
    assert design.order == "interleaved" and design.drift > 1.1  # the machine's drift is reported
    trials = store.trials(result.run_id)
    assert {t.round_position for t in trials} == {0, 1}
    firsts = collections.Counter(t.variant for t in trials if t.round_position == 0)
    assert firsts["A"] == firsts["B"]  # counterbalanced


@pytest.mark.slow
def test_a_real_ten_percent_difference_is_found_within_two_percent(tmp_path):
    drifting = f"drift_per_s = 0.2\ndrift_from = {time.time()}"
    store, result = run(
        two_fakes(a=drifting, b=drifting, b_decode=1.8, tokens=30),
        tmp_path / "r.db",
    )
    s = speedups(store, result.run_id)
    est = s.speedup_decode
    assert est.lo > 1.0, est  # found
    assert est.value == pytest.approx(2.0 / 1.8, rel=0.02)


def test_fresh_workers_per_repetition_keep_one_slow_process_from_faking_a_difference(tmp_path):
    # A and B are the same variant, but B's first process runs 25 % slower (its second 20 % faster,
    # its third as A): over processes B is A. One process per variant for the run sees only the
    # first: a false finding. Fresh workers per repetition see three and say the processes differ.
    slow_first = "process_factors = [1.25, 0.8, 1.0]"
    text = two_fakes(reps=3, b=slow_first, b_decode=2, limit=3, tokens=20)
    one_process = text.replace('order = "interleaved"', 'order = "interleaved"\nworkers = "one"')
    store, result = run(one_process, tmp_path / "one.db")
    one = speedups(store, result.run_id)
    assert store.resolve_run(result.run_id)["workers"] == "one"
    assert {t.worker for t in store.trials(result.run_id, include_warmup=True)} == {0}
    assert one.speedup_e2e.clusters is None and one.speedup_e2e.hi < 1.0  # "B is slower"

    store, result = run(text, tmp_path / "fresh.db")
    assert result.status == "ok" and store.resolve_run(result.run_id)["workers"] == "per-repetition"
    trials = store.trials(result.run_id, include_warmup=True)
    measured = [t for t in trials if not t.warmup]
    assert all(t.worker == t.repetition for t in measured)  # a new process every repetition
    assert collections.Counter(t.variant for t in trials if t.warmup) == {"A": 3, "B": 3}
    fresh = speedups(store, result.run_id)
    est = fresh.speedup_e2e
    assert est.clusters == 3 and est.lo < 1.0 < est.hi, est
    assert not fresh.significant


def test_auto_repetitions_stop_once_the_cis_are_narrow_or_at_the_cap(tmp_path):
    # identical variants: a loose target is met at the first look (3 repetitions)...
    store, result = run(
        two_fakes(
            reps='"auto"', top='max_repetitions = 12\nci_target = 0.5\nworkers = "one"', limit=2, tokens=6
        ),
        tmp_path / "auto.db",
    )
    assert result.status == "ok"
    run_row = store.resolve_run(result.run_id)
    assert run_row["repetitions"] == 3
    assert "stopped after 3 repetitions" in run_row["trial_order_note"]
    assert len(store.trials(result.run_id)) == 2 * 2 * 3
    assert {v["status"] for v in store.variants(result.run_id)} == {"ok"}
    # ...an impossible one runs to the cap and says so
    store, result = run(
        two_fakes(reps='"auto"', top="max_repetitions = 4\nci_target = 0.0001", limit=2, tokens=6),
        tmp_path / "cap.db",
    )
    run_row = store.resolve_run(result.run_id)
    assert run_row["repetitions"] == 4 and "reached the cap of 4 repetitions" in run_row["trial_order_note"]


def test_auto_repetitions_need_an_order_that_can_add_rounds():
    with pytest.raises(SpecError, match='repetitions = "auto" needs order'):
        parse_spec(two_fakes(reps='"auto"', order="sequential"))
    with pytest.raises(SpecError, match="'order' must be one of"):
        parse_spec(two_fakes(order="random"))


def test_blocks_when_forced_and_when_the_variants_do_not_fit(tmp_path, monkeypatch):
    store, result = run(two_fakes(reps=3, order="blocks", limit=2, tokens=4), tmp_path / "b.db")
    assert result.status == "ok" and store.resolve_run(result.run_id)["trial_order"] == "blocks"
    warmups = [t for t in store.trials(result.run_id, include_warmup=True) if t.warmup]
    assert len(warmups) == 4  # A | B B | A: four loads, each warmed up
    assert speedups(store, result.run_id).speedup_e2e.method == "paired"

    monkeypatch.setattr(preflight, "RESIDENT_MARGIN", 1e9)  # no second variant "fits"
    store, result = run(two_fakes(reps=2, limit=2, tokens=4), tmp_path / "fit.db")
    run_row = store.resolve_run(result.run_id)
    assert result.status == "ok" and run_row["trial_order"] == "blocks"
    assert "ran in counterbalanced blocks instead" in run_row["trial_order_note"]
    assert len(store.trials(result.run_id)) == 2 * 2 * 2
    lines = design_lines(analyze_run(store.load_run(result.run_id)).design)
    assert any("counterbalanced blocks" in line for line in lines)


def test_every_trial_carries_what_the_machine_did(tmp_path):
    store, result = run(two_fakes(reps=1, limit=2, tokens=4), tmp_path / "m.db")
    for t in store.trials(result.run_id, include_warmup=True):
        assert t.cpu_ms is not None and t.cpu_ms >= 0
        assert t.disturbed in (0, 1)
        assert (t.disturbance is None) == (t.disturbed == 0)
        if __import__("sys").platform.startswith("linux"):
            assert t.cpu_wait_ms is not None and t.load_avg is not None
    assert not math.isnan(store.trials(result.run_id)[0].cpu_ms)
