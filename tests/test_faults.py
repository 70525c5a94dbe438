"""Faults in the middle of a run, signals, and bad input: nothing recorded is ever wrong.

Every test here injects one fault into a real run (the fake strategy, a real SQLite file, real worker
processes) and then checks what was recorded with :func:`assert_closed`, the invariants every ended
run holds whatever went wrong: its status is not ``running`` and says what happened, a run that
failed as a whole says why, no variant is left ``pending``/``loaded``, the database passes
``PRAGMA integrity_check``, and ``workbench show`` still reads it.

To add a fault, pick the injector that reaches it and assert what the record must say:

- :func:`refuse_trials_after` — the store refuses inserts from the Nth trial on (a SQLite trigger: a
  database that cannot take a write, the way a full disk refuses one);
- :func:`run_cli` — ``workbench run`` as a child process, optionally under a real file size limit
  (``RLIMIT_FSIZE``) or with environment variables such as ``WORKBENCH_CANCEL_GRACE_S``;
- :func:`signal_when` — a signal to that child once the record shows a condition (a trial stored);
- a spec (:func:`spec`) whose fake variant misbehaves on purpose: ``prefill_ms_per_token`` on a long
  prompt makes a step longer than the grace time, ``crash_after_trials`` kills the worker,
  ``fail_on_prompt`` fails one trial.

Bad input that must be refused before anything runs goes through :func:`refused` (one ``Error:``
line naming the key and the value, exit 2, no database touched).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import assert_one_error_line, invoke, write

from workbench.testing.helpers import db_rows

POSIX = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and resource limits")

#: the short step of every fake variant here (ms)
BASE = """
name = "base"
repetitions = {repetitions}
warmup = 0
order = "sequential"

[[variants]]
name = "fake"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 1
{variant}

[[workloads]]
name = "w"
max_new_tokens = {max_new_tokens}
prompts = {prompts}
{workload}
"""


def spec(
    tmp_path: Path,
    *,
    repetitions: int = 15,
    variant: str = "",
    workload: str = "",
    top: str = "",
    prompts: str = '["one two three", "four five six"]',
    name: str = "spec.toml",
    max_new_tokens: str = "4",
) -> Path:
    """A one-variant fake spec (two prompts, 4 tokens) with extra lines where given."""
    text = top + BASE.format(
        repetitions=repetitions,
        variant=variant,
        workload=workload,
        prompts=prompts,
        max_new_tokens=max_new_tokens,
    )
    return write(tmp_path / name, text)


# -- injectors ------------------------------------------------------------------------------------


def refuse_trials_after(db: Path, n: int, message: str = "disk full (simulated)") -> None:
    """From now on the store refuses to insert a trial once ``n`` are stored (the database exists:
    create it first, e.g. with :class:`workbench.store.Store`)."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            f"create trigger refuse_trials before insert on trials when (select count(*) from trials) >= {n} "
            f"begin select raise(abort, '{message}'); end"
        )


def run_cli(
    spec_path: Path, db: Path, *, file_size_limit: int | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``workbench run SPEC --db DB`` as a child process (its output piped), under a file size limit
    in bytes when given (every file it or its workers write: the database, its WAL)."""
    command = [sys.executable, "-m", "workbench", "run", str(spec_path), "--db", str(db)]
    if file_size_limit is not None:  # set in the child, then exec: no preexec_fn in a threaded pytest
        command = [
            sys.executable,
            "-c",
            "import os, resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size_limit}, {file_size_limit})); "
            "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])",
            *command[1:],
        ]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def stored(db: Path, sql: str = "select count(*) from trials") -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0


def wait_for_trials(proc: subprocess.Popen[str], db: Path, trials: int = 1, *, timeout_s: float = 60) -> None:
    """Until ``trials`` trials are stored (the child still running)."""
    deadline = time.monotonic() + timeout_s
    while stored(db) < trials:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no trial was stored in time"
        time.sleep(0.05)


def signal_when(
    proc: subprocess.Popen[str], db: Path, sig: int, *, trials: int = 1, then_s: float = 0.5
) -> float:
    """Send ``sig`` to ``proc`` once ``trials`` trials are stored and ``then_s`` more seconds passed;
    returns when it was sent (``time.monotonic()``)."""
    wait_for_trials(proc, db, trials)
    time.sleep(then_s)
    proc.send_signal(sig)
    return time.monotonic()


def refused(tmp_path: Path, spec_path: Path, *needles: str, args: tuple[str, ...] = ()) -> str:
    """Bad input: one ``Error:`` line naming ``needles``, exit 2, and no database created."""
    db = tmp_path / "refused.db"
    line = assert_one_error_line(invoke("run", spec_path, "--db", db, *args), *needles)
    assert not db.exists(), "bad input must be refused before the database is touched"
    return line


def assert_closed(db: Path, status: str) -> dict:
    """The invariants of an ended run (the latest in ``db``), and its row."""
    with sqlite3.connect(db) as conn:
        assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    run = db_rows(db, "select * from runs order by id desc limit 1")[0]
    assert run["status"] == status, run
    assert run["finished_at"], run
    variants = db_rows(db, "select name, status, error from variants where run_id = ?", [run["id"]])
    assert variants and all(v["status"] in ("ok", "failed", "cancelled") for v in variants), variants
    assert all(v["error"] for v in variants if v["status"] == "failed"), variants
    shown = invoke("show", str(run["id"]), "--db", db)  # what was stored stays readable
    assert shown.exit_code == 0, shown.output
    return run


# -- a result the store cannot write ------------------------------------------------------------------


def test_a_trial_the_store_refuses_fails_the_run_with_the_reason(tmp_path):
    from workbench.store import Store

    db = tmp_path / "r.db"
    Store(db).close()
    refuse_trials_after(db, 5)
    result = invoke("run", spec(tmp_path), "--db", db)
    assert result.exit_code == 4, result.output  # the run failed as a whole (not 2: no bad input)
    assert "Traceback" not in result.output
    assert "Error: run 1 failed: a result could not be stored" in result.output
    assert "disk full (simulated)" in result.output
    run = assert_closed(db, "failed")
    assert "a result could not be stored" in run["error"] and "disk full (simulated)" in run["error"]
    assert stored(db) == 5  # what was stored before the fault is kept
    (variant,) = db_rows(db, "select status, error from variants")
    assert variant["status"] == "failed" and "disk full (simulated)" in variant["error"]
    listed = invoke("runs", "--db", db)
    assert listed.exit_code == 0 and "sequential" not in listed.output  # its order was never recorded
    shown = invoke("show", "1", "--db", db)
    assert "Failed as a whole: a result could not be stored" in shown.output


def test_a_store_fault_through_the_executor_returns_a_failed_result(tmp_path):
    """The library's caller (the GUI) gets the failure as a result, with the reason, not an exception."""
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import load_spec
    from workbench.store import Store

    db = tmp_path / "r.db"
    Store(db).close()
    refuse_trials_after(db, 3)
    with Store(db) as store:
        result = RunExecutor(load_spec(spec(tmp_path)), store).run()
    assert (result.status, result.ok) == ("failed", 3)
    assert result.error is not None and "disk full (simulated)" in result.error
    assert assert_closed(db, "failed")["error"] == result.error


@POSIX
def test_a_real_file_size_limit_fails_the_run_and_keeps_the_database_readable(tmp_path):
    from workbench.store import Store

    db = tmp_path / "r.db"
    Store(db).close()  # the schema first: the limit is what the run may add
    limit = db.stat().st_size + 96 * 1024
    proc = run_cli(spec(tmp_path, repetitions=200), db, file_size_limit=limit)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    assert "Traceback" not in err
    assert "could not be stored" in err
    run = assert_closed(db, "failed")
    assert "could not be stored" in run["error"]
    assert 0 < stored(db) < 400, "some trials stored, the rest never"
    assert stored(db, "select count(*) from trials where status = 'ok'") == stored(db)


# -- cancelling: Ctrl-C, SIGTERM, SIGHUP, even in the middle of a long step ---------------------------------

#: one word takes 0.3 s to prefill: the first prompt is quick, the second's step lasts a minute
LONG_STEP = dict(
    variant="prefill_ms_per_token = 300",
    prompts=json.dumps(["one", " ".join(["word"] * 200)]),
    repetitions=1,
)
GRACE_S = 1.5


@POSIX
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_closes_the_record_within_the_grace_time_even_inside_a_long_step(tmp_path, sig):
    psutil = pytest.importorskip("psutil")
    db = tmp_path / "r.db"
    proc = run_cli(spec(tmp_path, **LONG_STEP), db, env={"WORKBENCH_CANCEL_GRACE_S": str(GRACE_S)})
    try:
        wait_for_trials(proc, db, 1)
        workers = psutil.Process(proc.pid).children(recursive=True)
        sent = signal_when(proc, db, getattr(signal, sig), trials=1, then_s=0.5)
        # the step in progress would last 60 s: the worker is killed when the grace time is over
        _out, err = proc.communicate(timeout=30)
        ended = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert ended < 30
    run = assert_closed(db, "cancelled")
    assert run["error"] is None
    trials = db_rows(db, "select prompt_id, status, error from trials order by id")
    assert [(t["prompt_id"], t["status"]) for t in trials] == [("p1", "ok"), ("p2", "cancelled")]
    assert "killed" in trials[1]["error"]
    assert workers and not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def test_a_cancel_after_the_last_trial_leaves_a_complete_run_ok(tmp_path):
    """A Ctrl-C while the last workers close cancels nothing: every trial is stored."""
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import load_spec
    from workbench.store import Store

    db = tmp_path / "r.db"
    with Store(db) as store:
        holder: list[RunExecutor] = []

        def on_progress(progress) -> None:
            if progress.done == progress.total:  # the last trial is recorded: cancel now
                holder[0].cancel()

        executor = RunExecutor(load_spec(spec(tmp_path, repetitions=2)), store, on_progress=on_progress)
        holder.append(executor)
        result = executor.run()
    assert executor.cancelled
    assert (result.status, result.ok) == ("ok", 4)
    assert assert_closed(db, "ok")["error"] is None


def test_a_run_whose_process_died_is_closed_failed_with_the_reason(tmp_path):
    """The parent killed (SIGKILL: no handler runs): the next command closes its record."""
    db = tmp_path / "r.db"
    proc = run_cli(spec(tmp_path, repetitions=200), db)
    try:
        signal_when(proc, db, signal.SIGKILL, trials=1, then_s=0.2)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert db_rows(db, "select status from runs")[0]["status"] == "running"
    listed = invoke("runs", "--db", db)  # any command that opens the database notices
    assert listed.exit_code == 0, listed.output
    run = assert_closed(db, "failed")
    assert f"pid {proc.pid}" in run["error"] and "without closing" in run["error"]
    assert stored(db, "select count(*) from trials where status = 'ok'") >= 1


# -- bad input: refused in one line before anything runs -----------------------------------------------


@pytest.mark.parametrize(
    ("where", "line", "needles"),
    [
        (
            "budget",
            "99999999999999999999",
            ["workload 'w'", "'max_new_tokens'", "99999999999999999999", "out of range"],
        ),
        ("workload", "temperature = nan", ["workload 'w'", "'temperature'", "nan", "finite"]),
        ("workload", "top_p = -inf", ["workload 'w'", "'top_p'", "-inf"]),
        ("workload", "targets = {ttft_ms = inf}", ["workload 'w'", "'targets.ttft_ms'", "inf"]),
        ("variant", "prefill_ms_per_token = nan", ["variant 'fake'", "'prefill_ms_per_token'", "nan"]),
        ("variant", "verify_ms_per_token = inf", ["variant 'fake'", "'verify_ms_per_token'", "inf"]),
        (
            "variant",
            "crash_after_trials = -99999999999999999999",
            ["'crash_after_trials'", "-99999999999999999999"],
        ),
        ("variant", "sweep = {prefill_ms = [1, nan]}", ["variant 'fake'", "'sweep.prefill_ms[1]'", "nan"]),
        ("top", "seed = 99999999999999999999", ["spec: 'seed'", "99999999999999999999", "out of range"]),
        ("top", "temperature = inf", ["spec: 'temperature'", "inf", "finite"]),
    ],
)
def test_every_number_is_finite_and_in_sqlites_range(tmp_path, where, line, needles):
    extra = {
        "variant": {"variant": line},
        "workload": {"workload": line},
        "top": {"top": line + "\n"},
        "budget": {"max_new_tokens": line},
    }[where]
    refused(tmp_path, spec(tmp_path, **extra), *needles)


def test_an_inline_prompts_budget_beyond_sqlites_range_is_refused(tmp_path):
    prompts = '[{id = "a", prompt = "hi", max_new_tokens = 9223372036854775808}]'
    refused(tmp_path, spec(tmp_path, prompts=prompts), "prompts[0]", "max_new_tokens", "9223372036854775808")


def test_a_plan_too_large_to_hold_is_refused(tmp_path):
    refused(
        tmp_path, spec(tmp_path, repetitions=10**12), "plans 2,000,000,000,000 trials", "at most 1,000,000"
    )


def test_a_jsonl_number_out_of_range_is_refused_with_its_line(tmp_path):
    (tmp_path / "p.jsonl").write_text(
        '{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y", "max_new_tokens": 1e999}\n'
    )
    path = spec(tmp_path, prompts='"unused"').read_text().replace('prompts = "unused"', 'file = "p.jsonl"')
    refused(tmp_path, write(tmp_path / "j.toml", path), f"{tmp_path / 'p.jsonl'}:2:", "max_new_tokens", "inf")


def test_a_non_utf8_jsonl_file_is_refused_with_the_line_number(tmp_path):
    (tmp_path / "p.jsonl").write_bytes(b'{"id": "a", "prompt": "fine"}\n\n{"id": "b", "prompt": "caf\xe9"}\n')
    text = spec(tmp_path, prompts='"unused"').read_text().replace('prompts = "unused"', 'file = "p.jsonl"')
    refused(tmp_path, write(tmp_path / "j.toml", text), f"{tmp_path / 'p.jsonl'}:3:", "not UTF-8", "0xe9")


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_first_trial(tmp_path):
    (tmp_path / "afile").write_text("a file, not a folder", encoding="utf-8")
    refused(
        tmp_path,
        spec(tmp_path),
        "afile",
        "cannot create output folder",
        args=("--out", str(tmp_path / "afile" / "sub")),
    )
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "a file, not a folder"


@POSIX
def test_an_interpreter_with_a_malformed_reply_is_refused(tmp_path):
    from workbench.run.events import PROTOCOL

    answer = {"protocol": PROTOCOL, "workbench": "0", "python": "3", "packages": {}, "variants": ["fake"]}
    fake_python = tmp_path / "python"
    fake_python.write_text(f"#!/bin/sh\ncat >/dev/null\necho 'workbench-interpreter: {json.dumps(answer)}'\n")
    fake_python.chmod(0o755)
    refused(
        tmp_path,
        spec(tmp_path, variant=f'python = "{fake_python}"'),
        "variant 'fake'",
        str(fake_python),
        "malformed reply",
        "'variants'",
    )


def test_a_percentile_without_a_limit_is_refused(tmp_path):
    refused(
        tmp_path,
        spec(tmp_path, workload="targets = {percentile = 50}"),
        "workload 'w'",
        "percentile",
        "no limit",
    )


def test_an_empty_name_is_refused(tmp_path):
    text = spec(tmp_path).read_text().replace('name = "base"', 'name = ""')
    refused(tmp_path, write(tmp_path / "s.toml", text), "'name'", "empty")


def test_ci_target_without_auto_repetitions_is_refused_like_max_repetitions(tmp_path):
    refused(tmp_path, spec(tmp_path, top="ci_target = 0.05\n"), "'ci_target'", 'repetitions = "auto"')


def test_a_spec_with_a_bom_is_read(tmp_path):
    path = spec(tmp_path, repetitions=1)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = invoke("run", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.output


def test_a_strategy_that_names_its_variant_is_not_named_twice(tmp_path, monkeypatch):
    (tmp_path / "picky_mod.py").write_text(
        textwrap.dedent(
            """
            from workbench.strategy import StrategyError
            from workbench.testing import FakeStrategy

            class Picky(FakeStrategy):
                name = "picky"

                def preflight(self, variant):
                    raise StrategyError(f"variant {variant.name!r}: needs a picky machine")
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    text = spec(tmp_path).read_text().replace('strategy = "fake"', 'strategy = "picky_mod:Picky"')
    line = refused(tmp_path, write(tmp_path / "s.toml", text), "needs a picky machine")
    assert line.count("variant 'fake'") == 1, line


# -- JSON the CLI writes is strict -------------------------------------------------------------------


def strict_json(text: str) -> object:
    def no_constant(name: str) -> object:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=no_constant)


def test_json_output_never_holds_nan_or_infinity(tmp_path):
    db = tmp_path / "r.db"
    assert invoke("run", spec(tmp_path, repetitions=2), "--db", db).exit_code == 0
    # a run recorded with an infinite target (as a workbench before this check let through)
    with sqlite3.connect(db) as conn:
        text = conn.execute("select spec from runs").fetchone()[0]
        conn.execute("update runs set spec = ?", [text + "targets = {ttft_ms = inf, tpot_ms = 1e-300}\n"])
    for args in (("show", "1", "--json"), ("compare", "1", "--json"), ("runs", "--json")):
        result = invoke(*args, "--db", db)
        assert result.exit_code == 0, result.output
        strict_json(result.stdout)


def test_json_text_writes_null_for_what_is_not_a_number():
    from workbench.formatting import json_text

    data = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2,), "d": {"e": math.nan}}
    assert strict_json(json_text(data)) == {"a": None, "b": [None, None, 1.5], "c": [2], "d": {"e": None}}
