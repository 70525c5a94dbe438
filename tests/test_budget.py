"""repetitions = "auto" with a time budget, the progress total counted from the start (fresh workers'
warm-ups included), and the expected time said before a run — real worker processes, the fake
strategy."""

from __future__ import annotations

import pytest

from workbench.core.errors import SpecError
from workbench.run.design import planned_trials
from workbench.run.execute import RunExecutor
from workbench.run.plan import plan_run
from workbench.run.stopping import expected_duration
from workbench.spec.parse import duration_s, parse_spec
from workbench.store import Store


def spec_text(
    *, reps: str = "3", top: str = "", prefill_ms: float = 5, limit: int = 2, tokens: int = 4
) -> str:
    variant = """
[[variants]]
name = "{name}"
strategy = "fake"
prefill_ms = {prefill_ms}
decode_ms_per_token = 1
"""
    return (
        f'name = "budget"\nrepetitions = {reps}\nwarmup = 1\n{top}\n'
        + "".join(variant.format(name=n, prefill_ms=prefill_ms) for n in ("A", "B"))
        + f'[[workloads]]\nname = "code"\nlimit = {limit}\nmax_new_tokens = {tokens}\n'
    )


def run(text, db_path, **kwargs):
    store = Store(db_path)
    executor = RunExecutor(parse_spec(text), store, **kwargs)
    return store, executor, executor.run()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("5m", 300), ("90s", 90), ("1h30m", 5400), ("2.5m", 150), ("5 min", 300), (45, 45), (1.5, 1.5)],
)
def test_a_budget_is_a_time(value, seconds):
    assert duration_s(value, "spec: 'budget'") == seconds


@pytest.mark.parametrize("value", ["soon", "", "5x", "m", 0, 0.5, True, [5]])
def test_a_budget_that_is_no_time_is_refused(value):
    with pytest.raises(SpecError, match="'budget'"):
        duration_s(value, "spec: 'budget'")


def test_budget_needs_auto_repetitions_and_a_time():
    with pytest.raises(SpecError, match="'budget' applies to repetitions = \"auto\""):
        parse_spec(spec_text(top='budget = "5m"'))
    with pytest.raises(SpecError, match="must be a time"):
        parse_spec(spec_text(reps='"auto"', top='budget = "five minutes"'))
    spec = parse_spec(spec_text(reps='"auto"', top='budget = "5m"'))
    assert spec.budget_s == 300 and spec.auto_repetitions


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        ("", 2 * (1 + 3 * 2) + 2 * 2),  # fresh workers: every variant warms up again for reps 2 and 3
        ('workers = "one"', 2 * (1 + 3 * 2)),
        ('order = "blocks"', 2 * 3 * 2 + 4),  # A | B B | A: four loads, each warmed up
        ('order = "sequential"', 2 * (1 + 3 * 2)),
    ],
)
def test_the_progress_total_counts_every_trial_from_the_start(tmp_path, top, expected):
    spec = parse_spec(spec_text(top=top))
    assert planned_trials(spec, plan_run(spec)) == expected
    totals = []
    store, executor, result = run(
        spec_text(top=top), tmp_path / "r.db", on_progress=lambda p: totals.append(p.total)
    )
    assert result.status == "ok"
    recorded = store.trials(result.run_id, include_warmup=True)
    assert len(recorded) == expected
    assert set(totals) == {expected}  # never grew on the way
    assert executor.progress.done == expected


def test_auto_repetitions_stop_when_the_budget_is_spent_and_say_so(tmp_path):
    # every trial sleeps 150 ms of prefill: 3 repetitions of 2 variants x 2 prompts take over 1.8 s,
    # more than the 1 s budget; the target cannot be met (identical variants, a 0.01 % target)
    text = spec_text(
        reps='"auto"', top='ci_target = 0.0001\nbudget = "1s"\nmax_repetitions = 10', prefill_ms=150
    )
    seen = []
    store, executor, result = run(
        text, tmp_path / "b.db", on_progress=lambda p: seen.append((p.total, p.interval))
    )
    assert result.status == "ok"
    row = store.resolve_run(result.run_id)
    assert row["repetitions"] == 3  # the fewest "auto" runs, then the budget stops it
    note = row["trial_order_note"]
    assert "the budget of 1 s was spent" in note and "stopped after 3 repetitions" in note, note
    assert "widest speed-up CI ±" in note
    assert {v["status"] for v in store.variants(result.run_id)} == {"ok"}
    assert (
        executor.progress.total
        == executor.progress.done
        == len(store.trials(result.run_id, include_warmup=True))
    )
    assert seen[-1][1] is not None and seen[-1][1] > 0.0001  # the interval the GUI shows
    from workbench.analysis.run import analyze_run

    assert analyze_run(store.load_run(result.run_id)).design.auto  # so the verdict does not advise "auto"
    fixed_store, _, fixed = run(spec_text(), tmp_path / "f.db")
    assert not analyze_run(fixed_store.load_run(fixed.run_id)).design.auto


def test_a_met_target_stops_before_the_budget(tmp_path):
    text = spec_text(reps='"auto"', top='ci_target = 0.5\nbudget = "1h"\nworkers = "one"')
    store, _, result = run(text, tmp_path / "t.db")
    note = store.resolve_run(result.run_id)["trial_order_note"]
    assert "every speed-up CI within" in note and "budget" not in note


def test_the_expected_time_comes_from_an_earlier_run_of_the_same_spec(tmp_path):
    text = spec_text()
    spec = parse_spec(text)
    store = Store(tmp_path / "e.db")
    assert expected_duration(store, spec, 10) is None  # nothing to go by
    RunExecutor(spec, store).run()
    seconds, basis = expected_duration(store, spec, planned_trials(spec, plan_run(spec)))
    assert seconds > 0 and "of this spec here took" in basis
    other = parse_spec(text.replace('name = "budget"', 'name = "other"'))
    assert expected_duration(store, other, 10) is None  # another spec's run says nothing
