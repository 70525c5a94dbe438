"""Ctrl-C on a real `workbench run` process: the run is cancelled cleanly, finished trials kept."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")

SPEC = """
name = "slow fake"
repetitions = 50
warmup = 0
[[variants]]
name = "a"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 10
[[variants]]
name = "b"
strategy = "fake"
[[workloads]]
name = "code"
max_new_tokens = 10
"""


def count_ok(db) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(*) from trials where status = 'ok'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_sigint_cancels_the_run_and_keeps_finished_trials(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "run", str(spec), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while count_ok(db) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert count_ok(db) >= 3
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "Cancelling" in err
    with sqlite3.connect(db) as conn:
        status = conn.execute("select status from runs").fetchone()[0]
        rows = conn.execute("select variant, status from trials").fetchall()
    assert status == "cancelled"
    # interleaved: the variants took turns, so each has about half of what finished
    counts = {v: sum(name == v for name, _ in rows) for v in ("a", "b")}
    assert abs(counts["a"] - counts["b"]) <= 1, counts
    assert sum(s == "ok" for _, s in rows) >= 3
    assert len(rows) < 400  # far from the 800 planned
