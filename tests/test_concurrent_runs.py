"""Several `workbench run` on one results database at once (a GUI run beside a CLI run, two terminals):
every one finishes with every trial recorded, on a fresh database (the first open creates it, turns
on WAL and migrates it, in every process at once), on an existing one, and on one an older workbench
made (a migration pending, which every process finds at once)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from workbench.store import Store

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX processes")

#: one variant (a worker process less to start), 5 repetitions x 2 prompts measured, a warm-up: every
#: run writes a trial every few milliseconds while the others do
SPEC = """
name = "together {n}"
repetitions = 5
warmup = 1
[[variants]]
name = "a"
strategy = "fake"
prefill_ms = 0.5
decode_ms_per_token = 0.2
[[workloads]]
name = "code"
limit = 2
max_new_tokens = 8
"""
MEASURED, WARMUPS = 10, 1


def older_database(db) -> None:
    """A database as the workbench before the last migration left it: every run that opens it now
    finds that migration pending, and they must apply it once between them."""
    from sqlite_utils import Database

    from workbench.store.schema import migrations

    conn = sqlite3.connect(db)
    database = Database(conn)
    database.enable_wal()
    last = migrations.pending(database)[-1].name
    migrations.apply(database, stop_before=last)
    assert [m.name for m in migrations.pending(database)] == [last]
    conn.close()


@pytest.mark.parametrize("database", ["fresh", "existing", "older"])
@pytest.mark.parametrize("runs", [2, 4])
def test_concurrent_runs_on_one_database_all_finish_with_every_trial(tmp_path, runs, database):
    db = tmp_path / "results.db"
    if database == "existing":
        with Store(db) as store:  # created, migrated, and holding a run of its own
            old = store.create_run(name="before", spec_text="", baseline="a", version="0")
            store.finish_run(old, "ok")
    elif database == "older":
        older_database(db)
    specs = []
    for n in range(runs):
        path = tmp_path / f"spec{n}.toml"
        path.write_text(SPEC.format(n=n), encoding="utf-8")
        specs.append(path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "workbench", "run", str(path), "--db", str(db)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in specs
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    codes = [p.returncode for p in procs]
    assert codes == [0] * runs, "\n---\n".join(e[-1500:] for e in errors)
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "select r.name, r.status, sum(t.warmup = 0 and t.status = 'ok'), "
            "sum(t.warmup = 1 and t.status = 'ok') from runs r join trials t on t.run_id = r.id "
            "group by r.id order by r.name"
        ).fetchall()
    assert sorted(found) == [(f"together {n}", "ok", MEASURED, WARMUPS) for n in range(runs)]
