"""A run's status is the truth, whatever signal reaches whichever of its processes at whatever stage.

A real `workbench run` of a small fake-strategy spec (two variants, interleaved, a fresh worker per
repetition: a parent, two workers at a time and a fork server) is held at one stage -- a worker's
load, its warm-up, each measured trial, the last trial of each variant (the fake strategy's
``hold_at``), the quality pass or the final write (the parent, through tests/signal_helpers.py) --
and while it is held SIGTERM, SIGINT or SIGKILL goes to the parent, a worker or the fork server. Then
the stage is released and the run ends. Whatever happened:

- whenever a planned measured trial is missing (not stored ``ok``), the run is not ``ok`` and the
  exit code is not 0 (and an exit code of 0 means every planned trial is there, ``ok``);
- every trial stored before the signal is still there, as it was;
- no process of the run outlives it.

``make test`` runs a representative slice (every process kind, the last trial, the final write);
the full matrix is marked ``signal_matrix`` (deselected by default; ``.ci/run`` runs it:
``pytest -m signal_matrix``).
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.run.forkserver import fork_supported

psutil = pytest.importorskip("psutil")

pytestmark = [
    pytest.mark.skipif(os.name == "nt", reason="POSIX signals"),
    pytest.mark.skipif(fork_supported() is not None, reason=f"no fork server: {fork_supported()}"),
]

ROOT = Path(__file__).resolve().parents[1]
#: measured trials the spec plans: 2 variants x 2 repetitions x 1 prompt (plus one warm-up each per worker)
PLANNED = 4
VARIANTS = ("a", "b")
#: a worker's stages: its process number (0: the first repetition's, 1: the fresh one's) and what it does
WORKER_STAGES = ("0:load", "0:trial1", "0:trial2", "1:load", "1:trial1", "1:trial2")
#: trial1 is the warm-up of its process, trial2 its measured trial; 1:trial2 is the variant's last
PARENT_STAGES = ("quality", "finish")
TARGETS = ("parent", "worker a", "worker b", "fork server")
SIGNALS = ("SIGTERM", "SIGINT", "SIGKILL")


@dataclass(frozen=True)
class Case:
    target: str  # parent | worker a | worker b | fork server
    sig: str
    stage: str  # "a 1:trial2" (a worker's) or "parent finish"

    def __str__(self) -> str:
        return f"{self.sig} to {self.target} at {self.stage}"


def spec_text(hold: Path, stage: str) -> str:
    held, _, at = stage.partition(" ")
    variants = ""
    for name in VARIANTS:
        variants += textwrap.dedent(
            f"""
            [[variants]]
            name = "{name}"
            strategy = "fake"
            prefill_ms = 1
            decode_ms_per_token = 1
            hold_dir = "{hold}"
            """
        )
        if held == name:
            variants += f'hold_at = "{at}"\n'
    return (
        textwrap.dedent(
            """
        name = "signals"
        repetitions = 2
        warmup = 1
        workers = "per-repetition"
        quality = true
        """
        )
        + variants
        + '[[workloads]]\nname = "code"\nlimit = 1\nmax_new_tokens = 4\n'
    )


def rows(db: Path, sql: str) -> list[tuple]:
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError as exc:  # no such table yet: nothing stored
            if "no such table" in str(exc):
                return []
            raise


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def absent(case: Case) -> bool:
    """Whether the case's target does not exist at its stage: the second variant's worker and the fork
    server before the first variant has loaded (the loads of the first repetition are one after the
    other; the fork server starts once the first has loaded), every worker and the fork server at the
    final write (all closed)."""
    if case.stage == "a 0:load":
        return case.target in ("worker b", "fork server")
    return case.stage == "parent finish" and case.target != "parent"


def target_pid(case: Case, parent: int, hold: Path) -> int | None:
    """The process to signal (waiting for it to start: a fresh worker loading beside the held one
    may not have started yet), or None when :func:`absent` says it has no process at this stage."""
    if case.target == "parent":
        return parent
    if absent(case):
        return None
    deadline = time.monotonic() + 60
    while (pid := _find(case, parent, hold)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid


def _find(case: Case, parent: int, hold: Path) -> int | None:
    if case.target == "fork server":
        servers = [
            p.pid
            for p in psutil.Process(parent).children()
            if "workbench.run.forkserver" in " ".join(p.cmdline())
        ]
        return servers[0] if servers else None
    variant = case.target.split()[1]
    alive = []
    for path in hold.glob("worker-*"):
        pid = int(path.name.split("-")[1])
        name, _, number = path.read_text(encoding="utf-8").strip().partition(":")
        if name == variant and psutil.pid_exists(pid):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append((int(number), pid))
            except psutil.NoSuchProcess:
                continue
    return max(alive)[1] if alive else None


def run_case(case: Case, tmp: Path) -> str | None:
    """Run one case; None when it holds, else what went wrong (or ``n/a: ...``)."""
    hold = tmp / "hold"
    hold.mkdir(parents=True)
    db = tmp / "r.db"
    spec = tmp / "spec.toml"
    spec.write_text(spec_text(hold, case.stage), encoding="utf-8")
    held, _, at = case.stage.partition(" ")
    env = {**os.environ, "WORKBENCH_HOLD_DIR": str(hold), "WORKBENCH_CANCEL_GRACE_S": "5"}
    if held == "parent":
        env["WORKBENCH_HOLD_PARENT"] = at
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.signal_helpers", "run", str(spec), "--db", str(db)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + 120
        while not (hold / "reached").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                return (
                    f"{case}: the stage was never reached (exit {proc.poll()}): {proc.stderr.read()[-2000:]}"
                )
            time.sleep(0.02)
        reached = (hold / "reached").read_text(encoding="utf-8").split()[1]
        want = "parent:" + at if held == "parent" else at
        if reached != want:
            return f"{case}: held at {reached}, not {want}"
        seen.update({p.pid: p for p in descendants(proc.pid)})
        before = set(rows(db, "select id, variant, warmup, status from trials"))
        pid = target_pid(case, proc.pid, hold)
        if pid is None:
            (hold / "release").touch()
            proc.communicate(timeout=120)
            if not absent(case):
                return f"{case}: no {case.target} found to signal"
            return f"n/a: no {case.target} at this stage"
        target = psutil.Process(pid)
        target.send_signal(getattr(signal, case.sig))
        if case.sig == "SIGKILL":  # dead (a zombie until its parent reaps it) before the release
            ends = time.monotonic() + 30
            while _alive(target) and time.monotonic() < ends:
                time.sleep(0.01)
        else:
            time.sleep(0.3)  # its handler runs (a held process polls every 10 ms)
        (hold / "release").touch()
        _out, err = proc.communicate(timeout=180)
        code = proc.returncode
        (tmp / "exit_code").write_text(str(code), encoding="utf-8")
        problems = []
        if "Traceback" in err and case.target != "fork server":
            problems.append(f"a traceback: {err[-1500:]}")
        status = rows(db, "select status from runs")
        if status and status[0][0] == "running":  # its process was killed: the next command closes it
            from workbench.store import Store

            with Store(db) as store:
                store.reap_stale_runs()
            status = rows(db, "select status from runs")
        status_text = status[0][0] if status else None
        after = set(rows(db, "select id, variant, warmup, status from trials"))
        lost = before - after
        if lost:
            problems.append(f"trials stored before the signal are gone or changed: {sorted(lost)}")
        measured = rows(db, "select count(*) from trials where warmup = 0 and status = 'ok'")[0][0]
        if measured < PLANNED and (status_text == "ok" or code == 0):
            problems.append(
                f"{measured} of {PLANNED} measured trials, yet the run is {status_text}, exit {code}"
            )
        if code == 0 and (status_text != "ok" or measured != PLANNED):
            problems.append(
                f"exit 0 but the run is {status_text} with {measured} of {PLANNED} measured trials"
            )
        if status_text == "ok" and code not in (0, None):
            problems.append(f"the run is ok but the exit code is {code}")
        deadline = time.monotonic() + 30
        seen.update({p.pid: p for p in descendants(proc.pid)})
        while time.monotonic() < deadline and any(_alive(p) for p in seen.values()):
            time.sleep(0.1)
        left = [p.pid for p in seen.values() if _alive(p)]
        if left:
            problems.append(f"processes outlived the run: {left}")
        return f"{case}: " + "; ".join(problems) if problems else None
    finally:
        (hold / "release").touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in seen.values():
            if _alive(p):
                p.kill()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def all_cases() -> list[Case]:
    stages = [f"{v} {s}" for v in VARIANTS for s in WORKER_STAGES] + [f"parent {s}" for s in PARENT_STAGES]
    return [Case(t, s, st) for st, t, s in itertools.product(stages, TARGETS, SIGNALS)]


#: every process kind, the last trial of each variant, the quality pass and the final write
SLICE = [
    # (SIGTERM to worker a at a 1:trial2, a worker stopped from outside in its last trial: below)
    Case("worker b", "SIGKILL", "b 1:trial2"),  # the last trial of the run
    Case("worker a", "SIGINT", "b 1:trial2"),  # an idle worker
    Case("parent", "SIGTERM", "a 1:trial2"),
    Case("parent", "SIGKILL", "parent finish"),
    Case("parent", "SIGINT", "parent finish"),
    Case("worker b", "SIGTERM", "parent quality"),
    Case("fork server", "SIGKILL", "a 1:load"),
    Case("fork server", "SIGTERM", "b 1:trial2"),
]


@pytest.mark.parametrize("case", SLICE, ids=str)
def test_a_signal_at_a_stage_leaves_a_true_status(case, tmp_path):
    problem = run_case(case, tmp_path)
    assert problem is None, problem


def test_a_worker_stopped_from_outside_in_its_last_trial_leaves_a_partial_run_and_exit_3(tmp_path):
    """The trial it was in is stored ``cancelled`` (nobody cancelled the run), its variant ``failed``
    with the reason; the run is ``partial``, not ``ok``, and the exit code 3 (it read ok, exit 0)."""
    problem = run_case(Case("worker a", "SIGTERM", "a 1:trial2"), tmp_path)
    assert problem is None, problem
    assert (tmp_path / "exit_code").read_text(encoding="utf-8") == "3"
    db = tmp_path / "r.db"
    assert rows(db, "select status from runs") == [("partial",)]
    variants = dict(rows(db, "select name, status from variants"))
    assert variants == {"a": "failed", "b": "ok"}
    (error,) = rows(db, "select error from variants where name = 'a'")[0]
    assert "a signal this run did not send" in error
    last = rows(db, "select status, error from trials where variant = 'a' and warmup = 0 order by id")
    assert last == [
        ("ok", None),
        ("cancelled", "stopped by a signal this run did not send (SIGINT or SIGTERM from outside)"),
    ]


@pytest.mark.signal_matrix
def test_the_whole_signal_matrix_leaves_a_true_status_everywhere(tmp_path):
    cases = all_cases()
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda nc: run_case(nc[1], tmp_path / str(nc[0])), enumerate(cases)))
    problems = [o for o in outcomes if o is not None and not o.startswith("n/a")]
    skipped = [f"{c}: {o}" for c, o in zip(cases, outcomes, strict=True) if o and o.startswith("n/a")]
    print(f"{len(cases)} cases, {len(skipped)} without a target at their stage:", *skipped, sep="\n  ")
    assert not problems, "\n".join(problems)
