"""The SQLite store on real files: schema contract, migrations, round trips, bad files."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from workbench.core.errors import StoreError
from workbench.store import TRIAL_COLUMNS, Store, TrialRecord, resolve_db_path
from workbench.store.schema import migrations

CONTRACT = {
    "runs": {"id", "name", "started_at", "finished_at", "status", "spec", "environment"},
    "trials": {
        "id",
        "run_id",
        "variant",
        "strategy",
        "model",
        "workload",
        "prompt_id",
        "repetition",
        "warmup",
        "status",
        "error",
        "input_tokens",
        "output_tokens",
        "ttft_ms",
        "prefill_tokens_per_s",
        "decode_ms",
        "tpot_ms",
        "decode_tokens_per_s",
        "e2e_ms",
        "peak_memory_mb",
        "draft_tokens_proposed",
        "draft_tokens_accepted",
        "output_text",
        "matches_baseline",
    },
    "steps": {
        "trial_id",
        "idx",
        "t_ms",
        "n_tokens",
        "draft_proposed",
        "draft_accepted",
        "draft_ms",
        "verify_ms",
    },
}


def test_schema_has_every_contract_column(db_path):
    store = Store(db_path)
    for table, columns in CONTRACT.items():
        assert columns <= set(store.db[table].columns_dict), table
    assert store.db.journal_mode == "wal"
    assert not migrations.pending(store.db)


def test_reopening_applies_nothing_twice(db_path):
    Store(db_path).close()
    store = Store(db_path)
    applied = migrations.applied(store.db)
    assert len(applied) == len({m.name for m in applied})


def test_round_trip(db_path):
    store = Store(db_path)
    run_id = store.create_run(name="r", spec_text="x = 1", baseline="a", version="0")
    store.add_variant(run_id, {"name": "a", "strategy": "fake", "params": {"k": 1}})
    trial = TrialRecord(
        variant="a", workload="w", prompt_id="p", status="ok", ttft_ms=12.5, output_tokens=2, worker=0
    )
    steps = [{"idx": 0, "t_ms": 12.5, "n_tokens": 1}, {"idx": 1, "t_ms": 20.0, "n_tokens": 1}]
    trial_id = store.add_trial(run_id, trial, steps)
    store.finish_run(run_id, "ok")
    store.close()
    again = Store(db_path, create=False)
    assert again.resolve_run("latest")["status"] == "ok"
    assert again.resolve_run("r")["id"] == run_id
    (back,) = again.trials(run_id)
    # the record comes back as it went in, with the store's id and run
    assert back == dataclasses.replace(trial, id=trial_id, run_id=run_id)
    assert [s["t_ms"] for s in again.steps(trial_id)] == [12.5, 20.0]
    assert again.variants(run_id)[0]["params"] == '{"k": 1}'
    assert again.runs()[0]["trials"] == 1


def test_trial_and_steps_commit_together(db_path):
    store = Store(db_path)
    run_id = store.create_run(name="r", spec_text="", baseline="a", version="0")
    with pytest.raises(StoreError):
        # a duplicate step index violates the primary key: neither the trial nor any step may remain
        store.add_trial(
            run_id, TrialRecord(variant="a", status="ok"), [{"idx": 0, "t_ms": 1.0}, {"idx": 0, "t_ms": 2.0}]
        )
    assert store.trials(run_id, include_warmup=True) == []
    assert store.query("select count(*) as n from steps")[0]["n"] == 0


def test_a_second_connection_sees_committed_trials_while_a_run_is_open(db_path):
    writer = Store(db_path)
    run_id = writer.create_run(name="r", spec_text="", baseline="a", version="0")
    writer.add_trial(run_id, TrialRecord(variant="a", status="ok"))
    reader = Store(db_path, create=False)
    assert reader.resolve_run(run_id)["status"] == "running"
    assert len(reader.trials(run_id)) == 1


def test_not_a_sqlite_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 20)
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(StoreError, match="not a SQLite database"):
            Store(path, create=create)
    assert path.read_bytes() == before


def test_a_sqlite_file_of_another_app_is_not_a_results_db(tmp_path):
    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("create table x (a)").connection.commit()
    with pytest.raises(StoreError, match="not a workbench results database"):
        Store(path, create=False)


def test_missing_db_is_not_created_for_reading(tmp_path):
    with pytest.raises(StoreError, match="no results database"):
        Store(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


def test_unwritable_location(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder"):
        Store(blocker / "results.db")


def test_unknown_run(db_path):
    store = Store(db_path)
    with pytest.raises(StoreError, match="holds no runs"):
        store.resolve_run("latest")
    with pytest.raises(StoreError, match="no run '7'"):
        store.resolve_run("7")


def test_db_path_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "env.db"))
    assert resolve_db_path(None) == tmp_path / "env.db"
    assert resolve_db_path(tmp_path / "flag.db") == tmp_path / "flag.db"
    monkeypatch.delenv("WORKBENCH_DB")
    assert resolve_db_path(None).name == "results.db"


def test_delete_run_removes_its_rows_only(db_path):
    store = Store(db_path)
    keep = store.create_run(name="keep", spec_text="", baseline="a", version="0")
    drop = store.create_run(name="drop", spec_text="", baseline="a", version="0")
    for run_id in (keep, drop):
        store.add_variant(run_id, {"name": "a", "strategy": "fake"})
        store.add_trial(run_id, TrialRecord(variant="a", status="ok"), [{"idx": 0, "t_ms": 1.0}])
    store.delete_run(drop)
    assert [r["name"] for r in store.runs()] == ["keep"]
    assert store.query("select count(*) as n from steps")[0]["n"] == 1


def test_runs_left_running_by_a_dead_process_are_closed(db_path):
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = Store(db_path)
    orphan = store.create_run(name="orphan", spec_text="", baseline="a", version="0")
    store.add_trial(orphan, TrialRecord(variant="a", status="ok"))
    store.db["runs"].update(orphan, {"pid": dead.pid})
    empty = store.create_run(name="empty", spec_text="", baseline="a", version="0")
    store.db["runs"].update(empty, {"pid": dead.pid})
    mine = store.create_run(name="mine", spec_text="", baseline="a", version="0")  # this process: alive
    assert sorted(store.reap_stale_runs()) == [orphan, empty]
    status = {r["name"]: r["status"] for r in store.runs()}
    # a run whose process died did not end as planned: failed, with the reason; its trials are kept
    assert status == {"orphan": "failed", "empty": "failed", "mine": "running"}
    errors = {r["name"]: r["error"] for r in store.runs()}
    assert f"pid {dead.pid}" in errors["orphan"] and "ended without closing" in errors["orphan"]
    assert errors["mine"] is None
    assert len(store.trials(orphan)) == 1
    assert mine


def test_an_older_database_is_migrated_and_keeps_its_rows(db_path):
    from sqlite_utils import Database

    old = Database(db_path)
    migrations.apply(old, stop_before="m002_output_tokens_and_divergence")
    old["runs"].insert({"name": "from v1", "status": "ok", "spec": "", "environment": "{}"})
    old.conn.close()
    for create in (False, True):  # readers and writers both bring it up to date
        store = Store(db_path, create=create)
        assert {"output_token_ids", "first_divergence", "match_fraction", "draft_steps"} <= set(
            store.db["trials"].columns_dict
        )
        assert [r["name"] for r in store.runs()] == ["from v1"]
        store.close()


def test_server_metrics_table_arrives_by_migration_and_keeps_extra_figures(db_path):
    from sqlite_utils import Database

    old = Database(db_path)
    migrations.apply(old, stop_before="m007_endpoints_and_concurrency")
    old.conn.close()
    store = Store(db_path, create=False)  # a reader brings it up to date too
    assert {"timing_scope", "token_count_source", "concurrency", "group_offset_ms"} <= set(
        store.db["trials"].columns_dict
    )
    assert {"concurrency", "server"} <= set(store.db["variants"].columns_dict)
    run_id = store.create_run(name="r", spec_text="", baseline="a", version="0")
    store.add_server_metrics(
        run_id,
        {"variant": "a", "workload": "w", "warmup": 0, "trials": 1, "ttft_ms": 12.5, "novel_figure": 3},
    )
    (window,) = store.server_metrics(run_id)
    assert window["ttft_ms"] == 12.5 and json.loads(window["extra"]) == {"novel_figure": 3}
    store.delete_run(run_id)
    assert store.server_metrics(run_id, include_warmup=True) == []


def _columns(db_path, table):
    """The table's columns as the migrations create them on a fresh database."""
    Store(db_path).close()
    with sqlite3.connect(db_path) as conn:
        return [row[1] for row in conn.execute(f"pragma table_info({table})")]


def test_trial_record_fields_are_the_trials_columns(db_path):
    # a column added by a migration needs its field (and the other way round), in the table's order
    assert [f.name for f in dataclasses.fields(TrialRecord)] == _columns(db_path, "trials")
    assert list(TRIAL_COLUMNS) == _columns(db_path, "trials")


def test_run_and_variant_records_are_their_tables_columns(db_path):
    from workbench.store.records import RUN_COLUMNS, VARIANT_COLUMNS, RunRecord, VariantRecord

    assert list(RUN_COLUMNS) == _columns(db_path, "runs")
    assert list(VARIANT_COLUMNS) == _columns(db_path, "variants")
    run = RunRecord(id=3, name="x", status="ok")
    assert RunRecord.from_row(run.to_row()) == run
    with pytest.raises(TypeError, match="not columns of variants: nope"):
        VariantRecord.from_row({"name": "a", "nope": 1})


def test_the_loaded_runs_row_records_are_their_tables_columns(db_path):
    """The rows analysis reads whole (``Store.load_run``) are records of every column, in order (a
    ``select *`` row with a column the record lacks is an error, not a value silently dropped)."""
    from workbench.store.loaded import EquivalencePositionRecord, QualityVariantRecord, ServerWindowRecord

    for record in (ServerWindowRecord, QualityVariantRecord, EquivalencePositionRecord):
        assert list(record.columns()) == _columns(db_path, record.table), record.__name__


def test_a_loaded_run_holds_the_rows_analysis_reads(fake_run_db):
    from workbench.store.records import RunRecord

    with Store(fake_run_db, create=False) as store:
        loaded = store.load_run(1)
        assert loaded.run == RunRecord.from_row(store.resolve_run(1))
        assert [v.name for v in loaded.variants] == [v["name"] for v in store.variants(1)]
        assert list(loaded.trials) == store.trials(1)  # measured, warm-ups apart
        assert sorted([*loaded.trials, *loaded.warmups], key=lambda t: t.id) == store.trials(
            1, include_warmup=True
        )
        # the steps of the trials a timeline may show, and only those
        assert loaded.steps and set(loaded.steps) < {t.id for t in loaded.trials}
        some = next(iter(loaded.steps))
        assert loaded.steps[some] == tuple((s["t_ms"], s["n_tokens"]) for s in store.steps(some))


def test_step_records_are_the_steps_columns(db_path):
    from workbench.run.metrics import StepRecord

    fields = [f.name for f in dataclasses.fields(StepRecord)]
    assert ["trial_id", *fields] == _columns(db_path, "steps")


def test_trial_rows_round_trip_and_unknown_keys_are_refused():
    record = TrialRecord(variant="a", status="failed", error="boom", warmup=1, temperature=0.0)
    assert TrialRecord.from_row(record.to_row()) == record
    assert list(record.to_row()) == list(TRIAL_COLUMNS)
    with pytest.raises(TypeError, match="not columns of trials: ttft"):
        TrialRecord.from_row({"variant": "a", "ttft": 1.0})


def test_a_trial_that_never_ran_records_what_was_asked_and_why():
    record = TrialRecord.failed(
        "worker died",
        variant="v",
        strategy="fake",
        model="m",
        workload="code",
        prompt_id="p1",
        repetition=2,
        warmup=True,
        max_new_tokens=8,
        seed=3,
        temperature=0.0,
    )
    assert (record.status, record.error, record.warmup, record.repetition) == ("failed", "worker died", 1, 2)
    assert record.ttft_ms is None and record.round is None and record.concurrency is None
