"""Prompt compression's break-even (workbench.analysis.compression) and its words
(workbench.report.compression) on trials with known figures: the paired saving, the fitted lines,
where they cross, the intervals, and when no break-even can be computed."""

from __future__ import annotations

import json
import math

import pytest

from workbench.analysis.compression import (
    Crossing,
    compression_break_even,
    crossing,
    fit,
    paired_saving,
)
from workbench.report.compression import compression_line
from workbench.store.records import TrialRecord

#: a small symmetric jitter per repetition (ms): the means stay exact, the bootstrap has a spread
JITTER = (-3.0, 0.0, 3.0)


def _trials(
    lengths,
    *,
    ref_ttft,
    prefill_after,
    compress,
    repetitions=3,
    protected=None,
    rate=0.5,
    jitter=JITTER,
):
    """Baseline and compressed trials of one workload: per prompt length ``n`` the reference's TTFT
    ``ref_ttft(n)``, the compressed variant's compression ``compress(n)`` and its prefill of what was
    left ``prefill_after(n)`` (its TTFT is the sum), each repetition jittered by :data:`JITTER`."""
    out = []
    for p, n in enumerate(lengths):
        for r in range(repetitions):
            j = jitter[r % len(jitter)]
            common = dict(workload="docs", prompt_id=f"p{p}", repetition=r, status="ok", input_tokens=n)
            out.append(TrialRecord(variant="baseline", ttft_ms=ref_ttft(n) + j, **common))
            c = compress(n) + j
            out.append(
                TrialRecord(
                    variant="compressed",
                    ttft_ms=c + prefill_after(n) - j,
                    compress_ms=c,
                    compress_rate=rate,
                    trimmed_tokens=n // 2,
                    compress_protected=json.dumps(protected(n)) if protected else None,
                    **common,
                )
            )
    return out


def test_the_formulas_on_known_inputs():
    assert paired_saving(1000.0, 700.0, 300.0) == 600.0  # 1000 − (700 − 300)
    intercept, slope = fit([100, 200, 300], [250, 450, 650])
    assert (intercept, slope) == pytest.approx((50.0, 2.0))
    assert fit([200, 200], [1.0, 2.0]) is None  # one length: no line
    # saved = 2n, cost = 100 + n: the gain n − 100 crosses at 100 tokens and grows: pays above it
    assert crossing(0.0, 2.0, 100.0, 1.0) == Crossing("above", pytest.approx(100.0))
    # saved = 50 + 2n, cost = 10 + n: positive from 0 tokens on
    assert crossing(50.0, 2.0, 10.0, 1.0) == Crossing("any")
    # saved = 300 + n, cost = 2n: pays below 300 tokens only
    assert crossing(300.0, 1.0, 0.0, 2.0) == Crossing("below", pytest.approx(300.0))
    # saved = n, cost = 10 + 2n: never
    assert crossing(0.0, 1.0, 10.0, 2.0) == Crossing("never")
    assert crossing(0.0, 1.0, 10.0, 1.0) == Crossing("never")  # parallel, the cost above
    assert crossing(20.0, 1.0, 10.0, 1.0) == Crossing("any")  # parallel, the saving above
    # a slope that is not positive: the lines cannot say
    assert crossing(0.0, 0.0, 10.0, 1.0) is None and crossing(0.0, 1.0, 10.0, -0.5) is None


def test_a_measured_break_even_with_its_interval():
    """saved = TTFT_ref − prefill_after = 2n − n = n; cost = 50 + 0.5 n: gain 0.5 n − 50, n* = 100."""
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 1.0 * n,
        compress=lambda n: 50 + 0.5 * n,
    )
    (b,) = compression_break_even(trials, "baseline")
    assert (b.variant, b.workload, b.trials, b.pairs) == ("compressed", "docs", 6, 6)
    assert b.saved_ms == pytest.approx(300.0)  # mean of n over the pairs: the jitter cancels
    # mean cost (50 + 0.5 × 300 = 200) over mean saved (300)
    assert b.cost_fraction == pytest.approx(200.0 / 300.0)
    assert b.cost_fraction_lo < b.cost_fraction < b.cost_fraction_hi
    assert b.saved_ms_lo < 300.0 < b.saved_ms_hi
    assert b.break_even == "above" and b.break_even_tokens == pytest.approx(100.0)
    assert b.break_even_lo < 100.0 < b.break_even_hi < 200.0
    assert b.lengths == (200.0, 400.0) and b.no_break_even is None
    line = compression_line(b)
    assert "saved 300 ms of prefill" in line and "(mean of 6 pairs, measured)" in line
    assert "it costs 0.67 [" in line and "it pays on prompts above 100 tokens [" in line
    assert "any length" not in line


def test_the_modelled_saving_is_not_what_is_reported():
    """The saving is what the pairs measured, not the reference's prefill per token × the share
    dropped: here the compressed prompt's prefill is as slow as the whole one (nothing saved)."""
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 2.0 * n,  # the shorter prompt took as long
        compress=lambda n: 0.1 * n,
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.saved_ms == pytest.approx(0.0, abs=1e-9) and b.cost_fraction is None
    assert "it saved no prefill time here: it does not pay" in compression_line(b)


def test_pays_at_any_length_only_when_computed_so():
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 0.5 * n,  # saved 1.5 n
        compress=lambda n: 0.5 * n,  # cost 0.5 n: the gain is n, positive at every length
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even == "any" and b.break_even_tokens is None
    assert "it pays at any length" in compression_line(b)


def test_no_break_even_from_one_prompt_length():
    trials = _trials(
        (300, 300),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 1.0 * n,
        compress=lambda n: 0.2 * n,  # cheap: it pays at this length
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.cost_fraction == pytest.approx(0.2) and b.break_even is None
    assert "one length (300 tokens)" in b.no_break_even
    line = compression_line(b)
    assert "no break-even length can be computed: the prompts have one length" in line
    assert "any length" not in line and "it pays at these prompt lengths" in line


def test_no_break_even_when_a_fitted_slope_is_not_positive():
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 1.0 * n,
        compress=lambda n: 500.0 - 0.5 * n,  # shrinks as the prompt grows: noise
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even is None and "compression time" in b.no_break_even and "slope ≤ 0" in b.no_break_even
    assert "any length" not in compression_line(b)
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 1000.0,
        prefill_after=lambda n: 1000.0 - 100_000 / n,  # the saving shrinks with the length
        compress=lambda n: 0.1 * n,
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even is None and "prefill time saved" in b.no_break_even


def test_one_pair_per_prompt_gives_figures_without_intervals():
    trials = _trials(
        (200, 400),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 1.0 * n,
        compress=lambda n: 50 + 0.5 * n,
        repetitions=1,
        jitter=(0.0,),
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even == "above" and b.break_even_tokens == pytest.approx(100.0)
    assert b.break_even_lo is None and b.saved_ms_lo is None and b.cost_fraction_lo is None
    assert "[" not in compression_line(b)


def test_an_interval_with_no_upper_bound():
    """Noisy pairs whose lines sometimes never cross: the interval's upper end is ∞ (None in JSON)."""
    trials = []
    for p, n in enumerate((200, 400)):
        for r, j in enumerate((-40.0, -10.0, 10.0, 40.0)):
            common = dict(workload="docs", prompt_id=f"p{p}", repetition=r, status="ok", input_tokens=n)
            trials.append(TrialRecord(variant="baseline", ttft_ms=2.0 * n + j, **common))
            # saved n (± the reference's noise), cost 5 + 0.9 n: n* = 50, but a resample's saving
            # slope below 0.9 never crosses
            trials.append(
                TrialRecord(variant="compressed", ttft_ms=5 + 1.9 * n, compress_ms=5 + 0.9 * n, **common)
            )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even == "above" and b.break_even_tokens == pytest.approx(50.0)
    assert b.break_even_lo < 50.0 and math.isinf(b.break_even_hi)
    assert b.to_dict()["break_even_hi"] is None and b.to_dict()["break_even_lo"] == b.break_even_lo
    assert "–∞]" in compression_line(b)


def test_no_reference_pairs():
    trials = [
        t
        for t in _trials(
            (200, 400), ref_ttft=lambda n: 2.0 * n, prefill_after=lambda n: n, compress=lambda n: 0.5 * n
        )
        if t.variant == "compressed"
    ]
    (b,) = compression_break_even(trials, "baseline")
    assert b.pairs == 0 and b.saved_ms is None and b.cost_fraction is None
    assert "no paired reference trials" in compression_line(b)


def test_the_parts_it_may_not_drop_are_named_when_they_exceed_the_budget():
    """The issue's case: the document read as the question kept 98 % of the prompt with 50 % asked;
    the line says which part held it and how many tokens."""
    trials = _trials(
        (542, 542),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: 2.0 * n,
        compress=lambda n: 0.3 * n,
        protected=lambda n: {"template": 9, "instruction": 12, "question": 520},
    )
    (b,) = compression_break_even(trials, "baseline")
    assert b.over_budget == 6 and b.budget_tokens == pytest.approx(271.0)
    assert b.protected_parts == {"instruction": 12, "question": 520, "template": 9}
    line = compression_line(b)
    assert (
        "on 6 of 6 trials the parts it may not drop alone were above the 271-token budget "
        "(median tokens: question 520, instruction 12, template 9)" in line
    )
    # within the budget: nothing said
    fine = _trials(
        (542, 542),
        ref_ttft=lambda n: 2.0 * n,
        prefill_after=lambda n: n,
        compress=lambda n: 0.3 * n,
        protected=lambda n: {"template": 9, "question": 20},
    )
    (b,) = compression_break_even(fine, "baseline")
    assert b.over_budget == 0 and b.protected_parts == {} and "may not drop" not in compression_line(b)


def test_too_noisy_for_an_interval_and_an_extrapolated_crossing_are_said():
    """Two close lengths and a noisy reference: the lines cross, but fewer than 90 % of the
    resamples have both slopes rising — no interval, and the line says why; the crossing lies
    outside the measured lengths — the line says it is an extrapolation."""
    trials = []
    for p, n in enumerate((200, 220)):
        for r, j in enumerate((-40.0, -10.0, 10.0, 40.0)):
            common = dict(workload="docs", prompt_id=f"p{p}", repetition=r, status="ok", input_tokens=n)
            trials.append(TrialRecord(variant="baseline", ttft_ms=2.0 * n + j, **common))
            trials.append(
                TrialRecord(variant="compressed", ttft_ms=50 + 1.9 * n, compress_ms=50 + 0.9 * n, **common)
            )
    (b,) = compression_break_even(trials, "baseline")
    assert b.break_even == "above" and b.break_even_tokens == pytest.approx(500.0)  # 50 / (1 − 0.9)
    assert b.break_even_lo is None and b.break_even_fitted < 0.9
    line = compression_line(b)
    assert f"no interval: only {b.break_even_fitted:.0%} of the resampled pairs" in line
    assert "outside the measured lengths: an extrapolation" in line
