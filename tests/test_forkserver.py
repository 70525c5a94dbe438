"""Fresh workers forked from the fork server (workbench.run.forkserver): the same trials as spawned
ones, a fallback to spawning when a forked worker fails or hangs, and nothing left running after."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from workbench.run import process
from workbench.run.execute import RunExecutor
from workbench.run.forkserver import ForkServer, fork_supported
from workbench.run.interpreter import child_environment
from workbench.spec.parse import parse_spec
from workbench.store import Store

pytestmark = pytest.mark.skipif(fork_supported() is not None, reason=str(fork_supported()))


def spec(strategy: str = "fake", reps: int = 3) -> str:
    variants = "".join(
        f'[[variants]]\nname = "{name}"\nstrategy = "{strategy}"\nprefill_ms = 2\ndecode_ms_per_token = 0.5\n'
        for name in ("A", "B")
    )
    return (
        f'name = "fork"\nrepetitions = {reps}\nwarmup = 1\n{variants}'
        '[[workloads]]\nname = "code"\nlimit = 2\nmax_new_tokens = 6\n'
    )


def run(text, db_path):
    logs, messages = [], []
    store = Store(db_path)
    executor = RunExecutor(
        parse_spec(text), store, on_log=logs.append, on_progress=lambda p: messages.append(p.message)
    )
    return store, executor.run(), logs, messages


def children_of_us() -> list[str]:
    """Command lines of the processes whose parent is this one."""
    found = []
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if ppid == me:
            found.append(cmdline)
    return found


def outputs(store, run_id):
    return {
        (t.variant, t.prompt_id, t.repetition, t.warmup): t.output_token_ids
        for t in store.trials(run_id, include_warmup=True)
    }


def test_later_workers_are_forked_and_run_the_same_trials(tmp_path, monkeypatch):
    store, result, logs, messages = run(spec(), tmp_path / "f.db")
    assert result.status == "ok"
    assert any(line.startswith("fork server ready") for line in logs), logs
    forked = [m for m in messages if m and m.endswith("(forked)")]
    assert len(forked) == 4  # A and B, repetitions 2 and 3; the first workers are spawned
    trials = store.trials(result.run_id, include_warmup=True)
    assert all(t.status == "ok" for t in trials)
    assert {(t.variant, t.worker) for t in trials} == {(v, w) for v in "AB" for w in range(3)}
    measured = [t for t in trials if not t.warmup]
    assert all(t.worker == t.repetition for t in measured)
    # what a fresh worker does not measure again stays its variant's first worker's
    assert all(v["memory_bandwidth_gbs"] for v in store.variants(result.run_id))
    assert not any("workbench.run" in c for c in children_of_us())  # server and workers all ended

    # spawned only when asked: the same trials, token for token
    monkeypatch.setenv("WORKBENCH_WORKER_START", "spawn")
    spawned, again, logs, messages = run(spec(), tmp_path / "s.db")
    assert again.status == "ok"
    assert not any("fork server" in line for line in logs)
    assert not any(m and "(forked)" in m for m in messages)
    assert {t.worker for t in spawned.trials(again.run_id)} == {0, 1, 2}
    assert outputs(spawned, again.run_id) == outputs(store, result.run_id)


NO_FORK = """
    import os, time
    from workbench.testing import FakeStrategy

    def forked():
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return b"workbench.run.forkserver" in f.read()

    class FailsForked(FakeStrategy):
        name = "fails-forked"

        def load(self, variant, device):
            if forked():
                raise RuntimeError("this runtime does not survive a fork")
            return super().load(variant, device)

    class HangsForked(FakeStrategy):
        name = "hangs-forked"

        def load(self, variant, device):
            if forked():
                time.sleep(600)
            return super().load(variant, device)
"""


@pytest.mark.parametrize("strategy", ["FailsForked", "HangsForked"])
def test_a_forked_worker_that_fails_or_hangs_is_spawned_instead(tmp_path, monkeypatch, strategy):
    (tmp_path / "noforkmod.py").write_text(textwrap.dedent(NO_FORK), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(process, "FORKED_LOAD_GRACE_S", 3.0)
    started = time.monotonic()
    store, result, logs, _ = run(spec(f"noforkmod:{strategy}"), tmp_path / "n.db")
    assert result.status == "ok", [v["error"] for v in store.variants(result.run_id)]
    assert all(t.status == "ok" for t in store.trials(result.run_id))
    assert {t.worker for t in store.trials(result.run_id)} >= {0}
    failed = [line for line in logs if "a forked worker failed" in line]
    assert {line.split(":")[0] for line in failed} == {"A", "B"}  # each distrusted once, then spawned
    if strategy == "FailsForked":
        assert "does not survive a fork" in failed[0]
    else:
        assert any("did not load in time" in line for line in logs)
        assert time.monotonic() - started < 120
    assert not any("workbench.run" in c for c in children_of_us())


def test_the_server_refuses_to_fork_when_its_imports_started_threads(tmp_path):
    (tmp_path / "threadymod.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
        encoding="utf-8",
    )
    env = {**child_environment(), "PYTHONPATH": str(tmp_path)}
    server = ForkServer(sys.executable, ["json", "threadymod"], env).wait_ready()
    try:
        assert server.refused and "started 1 thread" in server.refused
        with pytest.raises(OSError, match="does not fork"):
            server.start(env)
    finally:
        server.close()


def test_a_forked_child_reports_how_it_ended(tmp_path):
    env = child_environment()
    server = ForkServer(sys.executable, ["json", "workbench.run.worker"], env).wait_ready()
    try:
        assert server.refused is None and server.imported >= 2
        bad = server.start({**env, "WORKBENCH_WORKER": "1"})
        bad.stdin.write("not a job\n")
        bad.stdin.flush()
        assert bad.wait(timeout=30) == 1  # worker.main could not read its job: a traceback, exit 1
        assert "JSONDecodeError" in bad.stderr.read()
        idle = server.start({**env, "WORKBENCH_WORKER": "1"})
        idle.send_signal(signal.SIGKILL)
        assert idle.wait(timeout=30) == -signal.SIGKILL
        for stream in (bad.stdin, bad.stdout, idle.stdin, idle.stdout, idle.stderr):
            stream.close()
    finally:
        server.close()
    assert server.proc.returncode == 0


def test_a_forked_worker_counts_its_memory_as_a_spawned_one(tmp_path, tiny_model_dir):
    # A real torch model: the workers' RSS is mostly torch's and transformers' libraries. A forked
    # worker maps the library pages its fork server had mapped, so its per-trial peak is a spawned
    # worker's, not tens of MB lower (fork() does not copy those page-table entries).
    variants = "".join(
        f'[[variants]]\nname = "{name}"\nmodel = "{tiny_model_dir}"\nthreads = 1\n' for name in ("A", "B")
    )
    text = (
        f'name = "mem"\nrepetitions = 3\nwarmup = 1\n{variants}'
        '[[workloads]]\nname = "code"\nlimit = 1\nmax_new_tokens = 4\n'
    )
    store, result, _, messages = run(text, tmp_path / "m.db")
    assert result.status == "ok"
    assert sum(bool(m) and m.endswith("(forked)") for m in messages) == 4
    peaks: dict[int, list[float]] = {}
    for t in store.trials(result.run_id):
        peaks.setdefault(t.worker, []).append(t.peak_memory_mb)
    spawned = min(peaks[0])
    for worker in (1, 2):
        assert abs(min(peaks[worker]) / spawned - 1) < 0.03, peaks
