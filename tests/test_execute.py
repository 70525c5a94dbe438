"""Runs through real worker processes: events, crashes, cancellation, what lands in SQLite."""

from __future__ import annotations

import json
import os
import signal

import pytest

from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

FAKE = """
name = "t"
repetitions = {reps}
warmup = 1
[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 2
decode_ms_per_token = {decode}
{extra_a}
[[variants]]
name = "other"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.5
[[workloads]]
name = "code"
limit = 3
max_new_tokens = 8
"""


def spec(reps=2, decode=0.5, extra_a=""):
    return parse_spec(FAKE.format(reps=reps, decode=decode, extra_a=extra_a))


def test_a_run_fills_runs_variants_trials_steps(db_path):
    store = Store(db_path)
    result = RunExecutor(spec(), store).run()
    assert result.status == "ok"
    assert (result.ok, result.failed) == (12, 0)
    run = store.resolve_run(result.run_id)
    assert run["status"] == "ok" and run["finished_at"]
    assert "[[variants]]" in run["spec"]
    env = json.loads(run["environment"])
    assert env["host"]["cpu_count"] >= 1 and "packages" in env["host"]
    assert set(env["variants"]) == {"baseline", "other"}
    variants = {v["name"]: v for v in store.variants(result.run_id)}
    assert variants["baseline"]["status"] == "ok" and variants["baseline"]["device"] == "cpu"
    trials = store.trials(result.run_id, include_warmup=True)
    # 2 variants × (2 reps × 3 prompts + a warm-up in each repetition's fresh worker)
    assert len(trials) == 16
    assert sum(t.warmup for t in trials) == 4
    assert {(t.repetition, t.worker) for t in trials if not t.warmup} == {(0, 0), (1, 1)}
    for t in trials:
        assert t.status == "ok"
        steps = store.steps(t.id)
        assert sum(s["n_tokens"] for s in steps) == t.output_tokens == 8
        assert steps[0]["t_ms"] == pytest.approx(t.ttft_ms)
    other = [t for t in trials if t.variant == "other" and not t.warmup]
    assert all(t.matches_baseline == 1 for t in other)  # the fake's tokens depend only on the prompt
    assert all(t.first_divergence is None and t.match_fraction == 1.0 for t in other)
    assert all(len(json.loads(t.output_token_ids)) == 8 for t in trials)
    assert all(t.matches_baseline is None for t in trials if t.variant == "baseline")


def test_worker_killed_mid_run_keeps_earlier_trials_and_goes_on(db_path):
    store = Store(db_path)
    killed = {}
    delivered = set()

    def on_progress(progress):
        # SIGKILL the baseline's worker from outside once it has delivered 3 trials (the variants take
        # turns: the other variant's worker is idle meanwhile and must not be touched)
        trial = progress.last_trial
        if trial and trial.variant == "baseline":
            delivered.add((trial.workload, trial.prompt_id, trial.repetition, trial.warmup))
        if progress.variant == "baseline" and len(delivered) == 3 and not killed:
            killed["pid"] = executor._proc.pid
            os.kill(executor._proc.pid, signal.SIGKILL)

    executor = RunExecutor(spec(reps=3, decode=20), store, on_progress=on_progress)
    result = executor.run()
    assert killed
    assert result.status == "partial"
    run = store.resolve_run(result.run_id)
    assert run["status"] == "partial"
    trials = store.trials(result.run_id, include_warmup=True)
    first = [t for t in trials if t.variant == "baseline"]
    assert len(first) == 10  # every planned trial is recorded: finished ones ok, the rest failed
    ok = [t for t in first if t.status == "ok"]
    assert len(ok) >= 3
    for t in ok:  # earlier trials intact, with their steps
        assert t.ttft_ms > 0 and len(store.steps(t.id)) == 8
    failed = [t for t in first if t.status == "failed"]
    assert failed and all("killed by SIGKILL" in t.error for t in failed)
    assert all(t.status == "ok" for t in trials if t.variant == "other")  # the run went on
    variants = {v["name"]: v for v in store.variants(result.run_id)}
    assert variants["baseline"]["status"] == "failed" and "SIGKILL" in variants["baseline"]["error"]
    assert variants["other"]["status"] == "ok"


def test_worker_that_kills_itself_is_recorded_the_same_way(db_path):
    store = Store(db_path)
    result = RunExecutor(spec(extra_a="crash_after_trials = 2"), store).run()
    assert result.status == "partial"
    first = [t for t in store.trials(result.run_id, include_warmup=True) if t.variant == "baseline"]
    assert [t.status for t in first[:2]] == ["ok", "ok"]
    assert all(t.status == "failed" and "SIGKILL" in t.error for t in first[2:])


def test_cancel_keeps_finished_trials_and_starts_nothing_new(db_path):
    store = Store(db_path)

    def on_progress(progress):
        if progress.done == 3:
            executor.cancel()

    executor = RunExecutor(spec(reps=3, decode=5), store, on_progress=on_progress)
    result = executor.run()
    assert result.status == "cancelled"
    assert store.resolve_run(result.run_id)["status"] == "cancelled"
    trials = store.trials(result.run_id, include_warmup=True)
    # interleaved: the two warm-ups, then the first trial of round 0; nothing is dispatched after a cancel
    assert {t.variant for t in trials} == {"baseline", "other"}
    assert [t.status for t in trials] == ["ok", "ok", "ok"]
    variants = {v["name"]: v["status"] for v in store.variants(result.run_id)}
    assert variants == {"baseline": "cancelled", "other": "cancelled"}


def test_a_variant_that_cannot_load_fails_all_its_trials_with_the_reason(db_path, tmp_path):
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_text("not really")
    text = FAKE.format(reps=1, decode=0.5, extra_a="").replace(
        'name = "other"\nstrategy = "fake"', f'name = "other"\nstrategy = "baseline"\nmodel = "{model}"'
    )
    text = text.replace("prefill_ms = 1\ndecode_ms_per_token = 0.5\n", "")
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "partial"
    other = [t for t in store.trials(result.run_id, include_warmup=True) if t.variant == "other"]
    assert len(other) == 4
    assert all(t.status == "failed" and "could not load variant 'other'" in t.error for t in other)


@pytest.mark.slow
def test_baseline_on_a_tiny_model_through_the_worker(db_path, tiny_model_dir, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        '{"id": "a", "prompt": "w1 w2 w3 the a of"}\n'
        '{"id": "b", "messages": [{"role": "user", "content": "w5 w6 and to"}]}\n'
    )
    text = f"""
repetitions = 2
warmup = 0
[[variants]]
name = "fp32"
model = "{tiny_model_dir}"
dtype = "float32"
[[variants]]
name = "again"
model = "{tiny_model_dir}"
dtype = "float32"
[[workloads]]
name = "mine"
file = "{prompts}"
max_new_tokens = 12
ignore_eos = true
"""
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "ok", result.errors
    trials = store.trials(result.run_id)
    assert len(trials) == 8
    assert all(t.output_tokens == 12 and t.finish_reason == "length" for t in trials)
    assert all(t.matches_baseline == 1 for t in trials if t.variant == "again")
    variant = store.variants(result.run_id)[0]
    assert variant["dtype"] == "float32" and variant["context_length"] == 256 and variant["weights_mb"] > 0


def test_compare_outputs_finds_the_first_divergence():
    from workbench.analysis.fidelity import compare_outputs

    assert compare_outputs([1, 2, 3], [1, 2, 3]) == {
        "matches_baseline": 1,
        "first_divergence": None,
        "match_fraction": 1.0,
    }
    assert compare_outputs([1, 9, 3, 4], [1, 2, 3, 4]) == {
        "matches_baseline": 0,
        "first_divergence": 1,
        "match_fraction": 0.75,
    }
    shorter = compare_outputs([1, 2], [1, 2, 3, 4])  # stopped early: diverges where it ends
    assert shorter["first_divergence"] == 2 and shorter["match_fraction"] == 0.5


def test_swept_variants_are_stored_with_their_value(db_path):
    store = Store(db_path)
    text = FAKE.format(reps=1, decode=0.1, extra_a="") + (
        '[[variants]]\nname = "steps"\nstrategy = "fake"\nprefill_ms = 1\nsweep = {tokens_per_step = [2, 4]}\n'
    )
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "ok"
    variants = {v["name"]: v for v in store.variants(result.run_id)}
    assert variants["steps tokens_per_step=4"]["sweep_param"] == "tokens_per_step"
    assert json.loads(variants["steps tokens_per_step=4"]["sweep_value"]) == 4
    assert variants["baseline"]["sweep_param"] is None
    trials = store.trials(result.run_id)
    assert {t.variant for t in trials} >= {"steps tokens_per_step=2", "steps tokens_per_step=4"}


def test_threads_is_applied_in_the_worker_and_recorded(db_path):
    pytest.importorskip("torch")
    with pytest.raises(Exception, match="'threads' must be a whole number of at least 1"):
        spec(extra_a="threads = 0")
    store = Store(db_path)
    result = RunExecutor(spec(reps=1, extra_a="threads = 1"), store).run()
    variants = {v["name"]: v for v in store.variants(result.run_id)}
    assert variants["baseline"]["threads"] == 1 and variants["other"]["threads"] is None
    env = json.loads(store.resolve_run(result.run_id)["environment"])
    assert env["variants"]["baseline"]["torch_threads"] == 1
