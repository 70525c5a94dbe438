"""The runner owns the clock: timing, metrics from steps, failures recorded, contract checks."""

from __future__ import annotations

import time

import pytest

from workbench.core.device import Device
from workbench.core.strategy import Output, Prompt, Session
from workbench.run.metrics import StepRecord, trial_metrics
from workbench.run.runner import TrialRunner
from workbench.testing import FakeConfig, FakeSession
from workbench.testing.helpers import trial_plan

plan = trial_plan


def run(config: FakeConfig, **kw):
    return TrialRunner(FakeSession(config), Device("cpu")).run(plan(**kw))


def test_ttft_and_tpot_match_injected_costs():
    result = run(FakeConfig(prefill_ms=30, decode_ms_per_token=5), max_new_tokens=11)
    row = result.record
    assert result.status == "ok"
    assert row.output_tokens == 11
    # The fake waits for absolute deadlines: nothing ends early, a loaded machine makes a step late
    # (and the next gap shorter by as much). Bounds below are exact, above they leave room for load;
    # benchmarks/fidelity.py checks the figures to +-3 % on a quiet machine.
    late = 40
    assert 29.5 <= row.ttft_ms < 30 + late
    last_token = row.ttft_ms + row.decode_ms
    assert 79.5 <= last_token < 80 + late
    assert row.tpot_ms == pytest.approx(row.decode_ms / 10)
    assert row.decode_tokens_per_s == pytest.approx(10 / row.decode_ms * 1e3)
    assert row.e2e_ms >= last_token
    assert row.prefill_tokens_per_s == pytest.approx(8 / row.ttft_ms * 1e3)
    assert row.input_tokens == 8
    assert len(result.steps) == 11
    assert row.peak_memory_mb > 0


def test_prefill_cost_grows_with_input():
    short = run(FakeConfig(prefill_ms=5, prefill_ms_per_token=1.0, decode_ms_per_token=0), prompt="x " * 10)
    long = run(FakeConfig(prefill_ms=5, prefill_ms_per_token=1.0, decode_ms_per_token=0), prompt="x " * 40)
    # sleeps never end early; on a loaded machine they may end late (slack above, none below)
    assert 14.5 <= short.record.ttft_ms < 15 + 15
    assert 44.5 <= long.record.ttft_ms < 45 + 15


def test_multi_token_steps_give_per_token_tpot_and_per_step_itl():
    result = run(FakeConfig(prefill_ms=5, decode_ms_per_token=2, tokens_per_step=4), max_new_tokens=13)
    row = result.record
    assert row.output_tokens == 13
    assert len(result.steps) == 4  # 1 (prefill) + 3 steps of 4 tokens
    assert row.tpot_ms == pytest.approx(row.decode_ms / 12)  # per token
    assert 5 + 24 - 0.5 <= row.ttft_ms + row.decode_ms < 5 + 24 + 40
    assert row.itl_p50_ms >= 4  # one gap per step of 4 tokens (8 ms on a quiet machine)
    assert row.draft_tokens_proposed == 9
    assert row.draft_tokens_accepted == 9
    assert row.draft_steps == 3


def test_metrics_are_recomputable_from_steps():
    result = run(FakeConfig(prefill_ms=3, decode_ms_per_token=1, tokens_per_step=2), max_new_tokens=9)
    steps = [StepRecord(**s) for s in result.steps]
    again = trial_metrics(steps, result.record.input_tokens)
    for key, value in again.to_row().items():
        assert getattr(result.record, key) == value


def test_strategy_error_becomes_a_failed_trial_with_the_reason():
    result = run(FakeConfig(fail_on_prompt="p1"))
    assert result.status == "failed"
    assert "fake failure on prompt 'p1'" in result.record.error
    assert result.steps == []


def test_prompt_longer_than_context_is_refused_before_running():
    result = run(FakeConfig(context_length=12), prompt="a b c d e f g h", max_new_tokens=10)
    assert result.status == "failed"
    assert "more than the model's context of 12" in result.record.error
    assert result.record.input_tokens == 8


def test_sweep_point_beyond_context_is_skipped_not_failed():
    runner = TrialRunner(FakeSession(FakeConfig(context_length=50)), Device("cpu"))
    fits = runner.run(plan(prompt=Prompt(id="in-0032", prompt="a b c", input_tokens=32)))
    assert fits.status == "ok"
    assert fits.record.input_tokens == 32  # the short text was repeated, then cut exactly
    beyond = runner.run(plan(prompt=Prompt(id="in-0064", prompt="a b c", input_tokens=64)))
    assert beyond.status == "skipped"


def test_cancel_stops_at_the_next_step():
    calls = {"n": 0}

    def cancelled() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    runner = TrialRunner(
        FakeSession(FakeConfig(prefill_ms=1, decode_ms_per_token=1)), Device("cpu"), cancelled=cancelled
    )
    result = runner.run(plan(max_new_tokens=50))
    assert result.status == "cancelled"
    assert calls["n"] == 4


class LyingSession(Session):
    def encode(self, prompt):
        return [1, 2, 3]

    def generate(self, request, probe):
        probe.step([5])
        return Output(token_ids=[5, 6], text="", finish_reason="length")


def test_tokens_must_match_what_the_probe_saw():
    result = TrialRunner(LyingSession(), Device("cpu")).run(plan())
    assert result.status == "failed"
    assert "contract broken" in result.record.error


class _CountingSession(Session):
    """Reports steps as counts (a server streaming text), recounts them at the end, then does
    untimed bookkeeping after marking the end."""

    def __init__(self, recount=None, return_ids=False):
        self.recount = recount
        self.return_ids = return_ids

    def encode(self, prompt):
        return [1, 2, 3]

    def generate(self, request, probe):
        for _ in range(3):
            time.sleep(0.005)
            probe.step(n_tokens=0)
        probe.end()
        time.sleep(0.05)  # counting tokens: after the end mark, so not in e2e
        if self.recount is not None:
            probe.recount(self.recount)
        return Output(
            token_ids=[7] if self.return_ids else [], text="abc", finish_reason="length", input_tokens=9
        )


def test_steps_reported_as_counts_are_recounted_and_end_marks_e2e():
    result = TrialRunner(_CountingSession(recount=[2, 0, 3]), Device("cpu")).run(plan())
    assert result.status == "ok", result.record.error
    assert [s["n_tokens"] for s in result.steps] == [2, 3]  # the empty step is dropped
    assert [s["idx"] for s in result.steps] == [0, 1]
    assert result.record.output_tokens == 5
    assert result.record.input_tokens == 9  # the strategy's own count wins
    assert result.record.output_token_ids is None
    assert result.record.e2e_ms < 40  # the 50 ms after probe.end() are not generation


def test_counted_steps_with_token_ids_returned_break_the_contract():
    result = TrialRunner(_CountingSession(recount=[1, 1, 1], return_ids=True), Device("cpu")).run(plan())
    assert result.status == "failed" and "contract" in result.record.error


def test_recount_must_match_the_steps():
    result = TrialRunner(_CountingSession(recount=[1, 1]), Device("cpu")).run(plan())
    assert result.status == "failed" and "2 counts for 3 steps" in result.record.error
