"""How far two processes of one variant stray: the process-to-process spread the paired statistics
and `workbench noise` report, and what the run records of the workers' threads."""

from __future__ import annotations

from workbench.analysis.run import analyze_run
from workbench.cli.running import process_spread_lines
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

SPEC = """
name = "spread"
repetitions = 3
warmup = 1
[[variants]]
name = "A"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 2
[[variants]]
name = "B"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 2
{b}
[[workloads]]
name = "code"
limit = 3
max_new_tokens = 20
"""


def b_summary(tmp_path, b: str):
    store = Store(tmp_path / "r.db")
    result = RunExecutor(parse_spec(SPEC.format(b=b)), store).run()
    assert result.status == "ok"
    (s,) = [s for s in analyze_run(store.load_run(result.run_id)).summaries if s.variant == "B"]
    return s


def test_processes_that_differ_show_as_the_process_spread_and_limit_the_interval(tmp_path):
    # B's three processes run 25 % slower, 20 % faster and as A: a spread far beyond a pair's own
    s = b_summary(tmp_path, "process_factors = [1.25, 0.8, 1.0]")
    est = s.speedup_e2e
    assert est.clusters == 3
    assert est.process_sd > 0.1 > est.pair_sd
    (line,) = process_spread_lines([s])
    assert "more repetitions (fresh processes) narrow it" in line and f"±{est.process_sd:.1%}" in line
    assert est.to_dict()["process_sd"] == est.process_sd  # in show --json / summary.json


def test_workers_for_the_run_have_no_process_spread_to_report(tmp_path):
    s = b_summary(tmp_path, "")
    assert s.speedup_e2e.process_sd is not None  # fresh workers: the spread is estimated...
    one = Store(tmp_path / "one.db")
    text = SPEC.format(b="").replace("warmup = 1", 'warmup = 1\nworkers = "one"')
    run_id = RunExecutor(parse_spec(text), one).run().run_id
    (s,) = [s for s in analyze_run(one.load_run(run_id)).summaries if s.variant == "B"]
    assert s.speedup_e2e.process_sd is None and process_spread_lines([s]) == []  # ...one process: not


def test_the_openmp_wait_policy_is_recorded_with_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # the workers inherit it
    store = Store(tmp_path / "w.db")
    result = RunExecutor(
        parse_spec(SPEC.format(b="").replace("repetitions = 3", "repetitions = 1")), store
    ).run()
    assert analyze_run(store.load_run(result.run_id)).environment["host"]["omp_wait_policy"] == "PASSIVE"
