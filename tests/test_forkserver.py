"""Fresh workers forked from the fork server (workbench.run.forkserver): the same trials as spawned
ones, a fallback to spawning when a forked worker fails or hangs, and nothing left running after."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from workbench.cli.common import run_exit_code
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


def our_children() -> dict[int, str]:
    """pid → command line of the processes whose parent is this one."""
    found = {}
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
            found[int(pid)] = cmdline
    return found


def children_of_us() -> list[str]:
    """Command lines of the processes whose parent is this one."""
    return list(our_children().values())


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


# -- children killed from outside (the OOM killer's pick): a real SIGKILL of the real process ---------

KILLERS = """
    import os, signal, sys
    from workbench.testing import FakeStrategy
    from workbench.testing import FakeSession

    if "workbench.run.forkserver" in " ".join(sys.orig_argv):
        if os.environ.get("KILL_SERVER_AT_IMPORT"):
            os.kill(os.getpid(), signal.SIGKILL)  # the fork server dies while the restart waits on it

    def forked():
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return b"workbench.run.forkserver" in f.read()

    class Session(FakeSession):
        def generate(self, request, probe):
            killer = os.environ.get("KILL_WORKER")
            if killer and self._trials == 1 and os.environ.get("WORKBENCH_WORKER") == "1":
                if killer == "KILL" and self.forked:
                    os.kill(os.getpid(), signal.SIGKILL)  # a forked worker killed mid-trial
                if killer == "TERM":
                    os.kill(os.getpid(), signal.SIGTERM)  # a signal from outside: nobody cancelled
            return super().generate(request, probe)

    class Killable(FakeStrategy):
        name = "killable"

        def load(self, variant, device):
            session = Session(variant.config)
            session.forked = forked()  # now: its server may be gone by the time it generates
            return session
"""


def the_issue_spec(strategy: str = "fake") -> str:
    """Two fake variants, 4 repetitions x 3 prompts, interleaved with fresh workers: 24 trials."""
    variants = "".join(
        f'[[variants]]\nname = "{name}"\nstrategy = "{strategy}"\nprefill_ms = 2\ndecode_ms_per_token = 0.5\n'
        for name in ("a", "b")
    )
    return (
        f'name = "fork"\nrepetitions = 4\nwarmup = 1\nworkers = "per-repetition"\n{variants}'
        '[[workloads]]\nname = "code"\nlimit = 3\nmax_new_tokens = 6\n'
    )


def fork_servers() -> list[int]:
    """The pids of this process's fork servers."""
    return [pid for pid, cmdline in our_children().items() if "workbench.run.forkserver" in cmdline]


def run_killing(text, db_path, when):
    """Run ``text``, SIGKILLing the fork server the first time ``when(progress message)`` is true."""
    logs, killed = [], []
    store = Store(db_path)

    def on_progress(progress):
        if not killed and when(progress.message):
            for pid in fork_servers():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    executor = RunExecutor(parse_spec(text), store, on_log=logs.append, on_progress=on_progress)
    return store, executor.run(), logs, killed


def assert_complete(store, result, logs):
    assert result.status == "ok", [v["error"] for v in store.variants(result.run_id)]
    trials = store.trials(result.run_id)
    assert len(trials) == 24 and all(t.status == "ok" for t in trials)
    assert sorted((t.variant, t.repetition) for t in trials) == sorted(
        (v, r) for v in "ab" for r in range(4) for _ in range(3)
    )
    assert not any(t.status == "cancelled" for t in store.trials(result.run_id, include_warmup=True))
    assert run_exit_code(result) == 0
    assert not any("workbench.run" in c for c in children_of_us())


def test_a_fork_server_killed_under_its_workers_costs_only_its_forks(tmp_path):
    # the issue's case: once the second repetition's forked workers have loaded, the fork server is
    # SIGKILLed. Its workers live on (they end with the run, not with their server) and finish the
    # repetition; the later repetitions' workers are spawned.
    store, result, logs, killed = run_killing(
        the_issue_spec(), tmp_path / "k.db", lambda m: m.endswith("(forked)")
    )
    assert killed
    assert_complete(store, result, logs)
    assert any("the fork server ended (killed by SIGKILL)" in line for line in logs), logs
    workers = {(t.variant, t.repetition): t.worker for t in store.trials(result.run_id)}
    assert {workers[v, r] for v in "ab" for r in range(4)} == {0, 1, 2, 3}


def test_a_fork_server_killed_between_repetitions(tmp_path):
    # killed while the second repetition's forked workers are idle, before the third one's restart
    seen = []

    def when(message):
        seen.append(message == "next repetition: fresh worker processes")
        return sum(seen) == 2

    store, result, logs, killed = run_killing(the_issue_spec(), tmp_path / "b.db", when)
    assert killed
    assert_complete(store, result, logs)
    assert any("the fork server ended (killed by SIGKILL)" in line for line in logs), logs


def killers(tmp_path, monkeypatch, **env):
    (tmp_path / "killersmod.py").write_text(textwrap.dedent(KILLERS), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return the_issue_spec("killersmod:Killable")


def test_a_fork_server_killed_while_the_restart_waits_on_it(tmp_path, monkeypatch):
    # the server SIGKILLs itself while it imports the first workers' modules (the restart waits for
    # it to be ready): the fresh workers are spawned
    text = killers(tmp_path, monkeypatch, KILL_SERVER_AT_IMPORT="1")
    store, result, logs, _ = run_killing(text, tmp_path / "w.db", lambda m: False)
    assert_complete(store, result, logs)
    assert any("the fork server did not start" in line for line in logs), logs
    assert not any("fork server ready" in line for line in logs)


def test_a_forked_worker_killed_mid_trial_fails_its_variant_with_the_reason(tmp_path, monkeypatch):
    text = killers(tmp_path, monkeypatch, KILL_WORKER="KILL")
    store, result, _, _ = run_killing(text, tmp_path / "f.db", lambda m: False)
    assert result.status in ("failed", "partial")
    assert run_exit_code(result) != 0
    errors = [v["error"] for v in store.variants(result.run_id)]
    assert all(e and "killed by SIGKILL" in e for e in errors), errors
    assert not any(t.status == "cancelled" for t in store.trials(result.run_id, include_warmup=True))
    assert len(store.trials(result.run_id)) == 24  # the ones never run are recorded failed
    assert not any("workbench.run" in c for c in children_of_us())


def test_a_worker_stopped_by_a_signal_nobody_in_the_run_sent_is_no_cancel(tmp_path, monkeypatch):
    # SIGTERM from outside (a service manager, a user's kill): the worker stops as if cancelled,
    # but the run was not cancelled: its variant fails with the reason, the run does not read ok
    text = killers(tmp_path, monkeypatch, KILL_WORKER="TERM")
    store, result, _, _ = run_killing(text, tmp_path / "t.db", lambda m: False)
    assert result.status in ("failed", "partial")
    assert run_exit_code(result) != 0
    for variant in store.variants(result.run_id):
        assert variant["status"] == "failed"
        assert "a signal this run did not send" in variant["error"]
    assert len(store.trials(result.run_id)) == 24
    assert not any("workbench.run" in c for c in children_of_us())


def test_a_forked_worker_killed_after_its_server_is_seen_through_its_pidfd(tmp_path, monkeypatch):
    # the server SIGKILLed once the forked workers have loaded, then a forked worker SIGKILLed
    # mid-trial: nobody is left to report its exit status, the parent still sees it end (a pidfd)
    # and fails its variant with the reason instead of waiting for it
    text = killers(tmp_path, monkeypatch, KILL_WORKER="KILL")
    started = time.monotonic()
    forked = []

    def both_forked(message):  # once both variants' forked workers have loaded, before their trials
        forked.extend([message] if message.endswith("(forked)") else [])
        return len(forked) == 2

    store, result, _, killed = run_killing(text, tmp_path / "o.db", both_forked)
    assert killed
    assert result.status in ("failed", "partial") and run_exit_code(result) != 0
    errors = [v["error"] for v in store.variants(result.run_id)]
    assert all(e and "its exit status is unknown" in e for e in errors), errors
    assert len(store.trials(result.run_id)) == 24
    assert time.monotonic() - started < 120
    assert not any("workbench.run" in c for c in children_of_us())


def test_a_server_leaves_onnxruntime_to_the_forked_worker():
    """ONNX Runtime starts a thread when imported: a server that imported it would refuse to fork, so
    the server's modules leave it out and the forked worker imports it itself."""
    from workbench.run.process import IMPORTED_AFTER_FORK, WorkerPool

    pool = WorkerPool(python=sys.executable, on_log=lambda _: None)
    pool._forkable["spec"] = ["torch", "onnxruntime", "onnxruntime.capi._pybind_state", "onnxruntime_genai"]
    key = pool._key("spec")
    assert "onnxruntime" in IMPORTED_AFTER_FORK
    assert not any(m.partition(".")[0] == "onnxruntime" for m in key)
    assert {"torch", "onnxruntime_genai", "workbench.run.worker"} <= set(key)
