"""Medians, stratified bootstrap CIs and speed-ups against the baseline variant."""

from __future__ import annotations

import itertools

import pytest

from workbench.analysis.compare import compare_runs
from workbench.analysis.run import analyze_run
from workbench.analysis.stats import bootstrap_median, speedup
from workbench.analysis.summary import summarize
from workbench.store import Store, TrialRecord
from workbench.store.loaded import StepTotals


def trial(variant, prompt, e2e, rep=0, warmup=0, status="ok", **kw):
    row = {
        "variant": variant,
        "workload": "w",
        "prompt_id": prompt,
        "repetition": rep,
        "warmup": warmup,
        "status": status,
        "e2e_ms": e2e,
        "ttft_ms": None if e2e is None else e2e / 10,
        "decode_tokens_per_s": None if e2e is None else 1000 / e2e,
        "matches_baseline": None,
    }
    return TrialRecord(**{**row, **kw})


def test_median_and_ci():
    est = bootstrap_median([1, 2, 3, 4, 100])
    assert est.value == 3 and est.n == 5
    assert est.lo <= 3 <= est.hi
    assert bootstrap_median([]).value is None
    single = bootstrap_median([5.0, None])
    assert single.value == 5.0 and single.lo is None


def test_stratified_ci_ignores_the_spread_between_prompts():
    # two prompts of very different cost, each measured consistently
    values = [10, 10.1, 9.9, 1000, 1001, 999]
    prompts = ["short"] * 3 + ["long"] * 3
    plain = bootstrap_median(values)
    stratified = bootstrap_median(values, prompts)
    assert stratified.hi - stratified.lo < plain.hi - plain.lo


def test_speedup_ratio_and_ci():
    base = [100, 101, 99, 100]
    fast = [50, 50.5, 49.5, 50]
    est = speedup(base, fast)
    assert est.value == pytest.approx(2.0)
    assert est.lo > 1.9 and est.hi < 2.1
    assert speedup([], fast) is None
    assert speedup(base, [0, 0]) is None


def test_summarize_excludes_warmups_and_failures_and_flags_significance():
    rows = []
    for rep in range(4):
        for prompt, cost in (("a", 100), ("b", 300)):
            rows.append(trial("baseline", prompt, cost + rep, rep=rep))
            rows.append(trial("fast", prompt, cost / 2 + rep, rep=rep, matches_baseline=1))
            rows.append(trial("same", prompt, cost + 3 - rep, rep=rep, matches_baseline=0))
    rows.append(trial("fast", "a", 1.0, warmup=1))  # warm-up: must not count
    rows.append(trial("fast", "a", None, status="failed"))
    summaries = {s.variant: s for s in summarize(rows, "baseline")}
    fast, same, base = summaries["fast"], summaries["same"], summaries["baseline"]
    assert fast.n_ok == 8 and fast.n_failed == 1
    assert fast.speedup_e2e.value == pytest.approx(2.0, rel=0.05)
    assert fast.significant is True
    assert same.significant is False
    assert fast.speedup_decode.value == pytest.approx(2.0, rel=0.1)
    assert fast.matches_baseline == 1.0 and same.matches_baseline == 0.0
    assert base.speedup_e2e is None and base.matches_baseline is None


def test_acceptance_rate_and_mean_accepted_length():
    rows = [
        trial("spec", "a", 10.0, rep=r, draft_tokens_proposed=8, draft_tokens_accepted=6, draft_steps=2)
        for r in range(3)
    ]
    (summary,) = summarize(rows, None)
    assert summary.acceptance_rate == 0.75
    assert summary.mean_accepted_length == 4.0  # 1 + 18 accepted / 6 steps with a draft
    (plain,) = summarize([trial("base", "a", 10.0)], None)
    assert plain.acceptance_rate is None and plain.mean_accepted_length is None


def test_draft_and_verify_shares_of_decode_time():
    rows = [
        trial("spec", "a", 100.0, rep=r, id=r + 1, decode_ms=80.0, draft_tokens_proposed=4) for r in range(2)
    ]
    rows.append(trial("base", "a", 100.0, id=3, decode_ms=80.0))
    # the sums of each trial's steps' draft_ms and verify_ms (LoadedRun.step_totals: sub-timed trials only)
    totals = {i: StepTotals(draft_ms=20.0, verify_ms=50.0) for i in (1, 2)}
    summaries = {s.variant: s for s in summarize(rows, None, step_totals=totals)}
    assert summaries["spec"].draft_share == pytest.approx(0.25)
    assert summaries["spec"].verify_share == pytest.approx(0.625)
    assert summaries["base"].draft_share is None


def test_compare_runs_matches_variants_by_name():
    before = [
        trial(v, p, e2e, rep=r) for v, e2e in (("x", 100), ("gone", 50)) for p in "ab" for r in range(3)
    ]
    after = [
        trial(v, p, e2e + r, rep=r) for v, e2e in (("x", 50), ("new", 10)) for p in "ab" for r in range(3)
    ]
    results, unmatched = compare_runs(before, after, 1, 2)
    (x,) = results
    assert (x.variant, x.workload, x.run_a, x.run_b) == ("x", "w", 1, 2)
    assert x.speedup_e2e.value == pytest.approx(100 / 51)
    assert x.speedup_e2e.lo > 1 and x.significant is True
    assert x.speedup_decode.value == pytest.approx(100 / 51)  # decode tok/s = 1000 / e2e here
    assert x.a["e2e_ms"].value == 100 and x.b["e2e_ms"].value == 51
    assert unmatched == [("gone", 1), ("new", 2)]
    assert x.to_dict()["speedup_e2e"]["value"] == x.speedup_e2e.value


def test_analyze_run_timelines_and_accepted_lengths(fake_run_db):
    with Store(fake_run_db, create=False) as store:
        analysis = analyze_run(store.load_run(1))
        trials = {(t.variant, t.workload, t.prompt_id, t.repetition): t for t in store.trials(1)}
    assert analysis.baseline == "baseline" and analysis.device == "cpu"
    assert [p.workload for p in analysis.phases] == ["rag", "code", "sweep-input", "sweep-output"]
    by = {(t.variant, t.workload): t for t in analysis.timelines}
    assert set(by) == {
        (v, w) for v in ("baseline", "int8", "spec") for w in ("rag", "code", "sweep-input", "sweep-output")
    }
    for t in analysis.timelines:
        row = trials[(t.variant, t.workload, t.prompt_id, t.repetition)]
        assert t.t_ms[0] == 0 and t.tokens[0] == 0
        assert t.t_ms[1] == pytest.approx(row.ttft_ms)  # the flat start is the prefill
        assert t.tokens[-1] == row.output_tokens
        assert list(t.t_ms) == sorted(t.t_ms)
    steps = by[("spec", "code")].tokens
    jumps = {b - a for a, b in itertools.pairwise(steps)}
    assert jumps <= {1, 2, 3} and 3 in jumps  # 3 tokens per step, the first and last fewer
    assert set(analysis.accepted_lengths) == {"spec"}
    assert max(analysis.accepted_lengths["spec"]) == 2  # tokens_per_step = 3: two accepted per draft
