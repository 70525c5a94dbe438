"""Medians, stratified bootstrap CIs and speed-ups against the baseline variant."""

from __future__ import annotations

import pytest

from workbench.analysis import bootstrap_median, speedup, summarize


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
    return {**row, **kw}


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
