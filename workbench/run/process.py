"""The worker processes seen from the parent: start one, talk to it over its pipes, interrupt it, reap
it, and say why it died.

A :class:`WorkerPool` starts every worker of a run and knows which are alive (under its own lock: the
CLI's Ctrl-C handler and the GUI's Cancel button stop them from another thread). A
:class:`WorkerProcess` is one of them: the job goes in as the first line, then one command per unit;
its events (:mod:`workbench.run.events`) are read until the unit is done. What it prints that is no
event, and everything on its stderr, goes to the pool's ``on_log``.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from workbench.run import events as ev
from workbench.run.forkserver import ForkedProcess, ForkServer, fork_supported
from workbench.run.interpreter import child_environment, command

__all__ = [
    "CANCEL_GRACE_S",
    "IMPORTED_AFTER_FORK",
    "UnitOutcome",
    "WorkerPool",
    "WorkerProcess",
    "cancel_grace_s",
    "describe_exit",
    "interrupt",
]

#: how a command to a worker ended: it said it was done, a cancel stopped it, or its process ended
UnitOutcome = Literal["done", "cancelled", "died"]

#: a worker's process: spawned, or forked by the fork server
Proc = subprocess.Popen[str] | ForkedProcess
#: a forked worker that has not loaded within this many seconds more than five times its variant's
#: first load counts as hung (a runtime that did not survive the fork) and is spawned instead
FORKED_LOAD_GRACE_S = 60.0

#: packages a fork server does not import: their import starts a thread (ONNX Runtime's, at import),
#: which a forked child would not have, so a server holding them refuses to fork; a forked worker
#: imports them after the fork, as its load asks for them (benchmarks/fork_safety.py)
IMPORTED_AFTER_FORK = frozenset({"onnxruntime"})

#: seconds a worker gets to stop after a cancel before it is killed (``WORKBENCH_CANCEL_GRACE_S``
#: sets another: a model whose load or step takes longer than this cannot stop at a step in time)
CANCEL_GRACE_S = 15.0


def cancel_grace_s() -> float:
    """The grace time in force: ``WORKBENCH_CANCEL_GRACE_S`` when it is a positive number, else
    :data:`CANCEL_GRACE_S`."""
    try:
        value = float(os.environ.get("WORKBENCH_CANCEL_GRACE_S", ""))
    except ValueError:
        return CANCEL_GRACE_S
    return value if 0 < value < float("inf") else CANCEL_GRACE_S


class WorkerPool:
    """The run's live worker processes (several at once when interleaving).

    A variant's first worker is spawned (a new interpreter); its later ones (fresh workers per
    repetition) are forked from the fork server (:mod:`workbench.run.forkserver`) when the first one
    ran on the CPU in this interpreter, and spawned otherwise."""

    def __init__(self, *, python: str, on_log: Callable[[str], None]) -> None:
        self._python = python  # the workbench's own interpreter
        self._on_log = on_log
        # re-entrant: the CLI's signal handler stops the pool from the thread that may hold it
        self._lock = threading.RLock()
        self._live: set[WorkerProcess] = set()
        self._stopping = False
        #: variant → the modules its first worker imported (variants whose later workers may be forked)
        self._forkable: dict[str, list[str]] = {}
        self._first_load_s: dict[str, float] = {}
        self._servers: dict[tuple[str, ...], ForkServer] = {}  # by the modules they imported
        self._unforkable: set[tuple[str, ...]] = set()  # module sets whose server failed
        self._no_fork: str | None = fork_supported()  # why no worker is forked here

    def start(
        self, name: str, python: str | None, job: dict[str, Any], number: int, *, spawn: bool = False
    ) -> WorkerProcess:
        """Start variant ``name``'s worker (``python``: another interpreter, None: this one) as the
        variant's process ``number`` (0 = its first) and send it ``job``; forked when it may be
        (see the class), unless ``spawn``."""
        argv = (
            command(python, "workbench.run.worker")
            if python
            else [self._python, "-m", "workbench.run.worker"]
        )
        proc = None if spawn or python or number == 0 else self._fork(name, number)
        worker = WorkerProcess(
            name,
            argv,
            number,
            on_log=self._on_log,
            on_exit=self._forget,
            on_loaded=self._learn,
            proc=proc,
            python=python,
        )
        with self._lock:
            self._live.add(worker)
            stopping = self._stopping
        if stopping:  # stopped while starting
            interrupt(worker.proc)
        worker.send(job)
        return worker

    def _learn(self, worker: WorkerProcess, event: ev.Loaded) -> None:
        """A worker loaded: a first one on the CPU in this interpreter makes its variant forkable."""
        if worker.number == 0 and event.modules and event.device == "cpu" and not worker.python:
            with self._lock:
                self._forkable[worker.name] = list(event.modules)
                self._first_load_s[worker.name] = event.load_ms / 1000

    def load_timeout(self, worker: WorkerProcess) -> float | None:
        """How long a forked worker may take to load before it counts as hung (a runtime that did
        not survive the fork): :data:`FORKED_LOAD_GRACE_S` more than five times its variant's first
        load."""
        if not worker.forked:
            return None
        return FORKED_LOAD_GRACE_S + 5 * self._first_load_s.get(worker.name, 60.0)

    def distrust(self, name: str, reason: str) -> None:
        """Spawn ``name``'s workers from now on (its forked one failed: ``reason``)."""
        with self._lock:
            self._forkable.pop(name, None)
        self._on_log(f"{name}: a forked worker failed ({reason}); its workers are spawned from now on")

    def prepare(self, names: Sequence[str], *, wait: bool = True) -> None:
        """Start the fork servers that variants ``names``' fresh workers will come from, all at once
        (each imports its modules meanwhile), and wait until they are ready (``wait = False``: start
        them and return; a later call waits)."""
        with self._lock:
            if self._no_fork is not None or self._stopping:
                return
            wanted = {self._key(n) for n in names if n in self._forkable}
            for key in wanted - set(self._servers) - self._unforkable:
                try:
                    self._servers[key] = ForkServer(self._python, key, child_environment())
                except OSError as exc:  # no process to start (out of memory, no such interpreter)
                    self._unforkable.add(key)
                    self._on_log(f"workers are spawned, not forked: the fork server did not start ({exc})")
            pending = {key: server for key, server in self._servers.items() if not server.ready}
        if not wait:
            return
        for key, server in pending.items():
            try:
                server.wait_ready()
                if server.refused:
                    raise OSError(f"it will not fork: {server.refused}")
            except OSError as exc:
                self._drop(key, server, f"workers are spawned, not forked: {exc}")
                continue
            self._on_log(
                f"fork server ready: {server.imported} modules imported once; fresh workers are forked from it"
            )

    def _key(self, name: str) -> tuple[str, ...]:
        """The fork server a variant's workers come from: one per set of imported modules, so that a
        forked worker holds what a spawned one of its variant would (and its memory counts the same).
        The packages of :data:`IMPORTED_AFTER_FORK` are left to the forked worker, which imports them
        itself when it loads."""
        modules = {m for m in self._forkable[name] if m.partition(".")[0] not in IMPORTED_AFTER_FORK}
        return tuple(sorted(modules | {"workbench.run.worker"}))

    def _fork(self, name: str, number: int) -> ForkedProcess | None:
        """A forked worker for variant ``name``, or None (then it is spawned)."""
        with self._lock:
            if self._no_fork is not None or name not in self._forkable or self._stopping:
                return None
            key = self._key(name)
            if key in self._unforkable:
                return None
        if key not in self._servers:
            self.prepare([name])
        with self._lock:
            server = self._servers.get(key)
        if server is None:
            return None
        try:
            return server.start({**child_environment(), "WORKBENCH_WORKER": str(number)})
        except OSError as exc:
            self._drop(key, server, f"{name}: workers are spawned, not forked: {exc}")
            return None

    def _drop(self, key: tuple[str, ...], server: ForkServer, why: str) -> None:
        """A fork server that failed: closed, and its variants' workers spawned from now on."""
        with self._lock:
            self._servers.pop(key, None)
            self._unforkable.add(key)
        server.close()
        self._on_log(why)

    def shutdown(self) -> None:
        """End the fork servers (at the end of a run, once its workers are closed)."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()

    def stop(self, *, kill: bool = False) -> None:
        """Interrupt every live worker (the running trial stops at its next step), or kill them; a
        worker started after this is interrupted at once. The first stop also starts the grace time:
        when it is over, every worker still alive (one in the middle of a long step or load) is
        killed, so a cancel ends every worker within :func:`cancel_grace_s`."""
        with self._lock:
            first = not self._stopping
            self._stopping = True
            procs = [w.proc for w in self._live]
        for proc in procs:
            if proc.poll() is None:
                if kill:
                    proc.kill()
                else:
                    interrupt(proc)
        if first and not kill:
            timer = threading.Timer(cancel_grace_s(), self._kill_live)
            timer.daemon = True
            timer.start()

    def _kill_live(self) -> None:
        with self._lock:
            procs = [w.proc for w in self._live]
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    def _forget(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._live.discard(worker)


class WorkerProcess:
    """One variant's worker process."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        number: int,
        *,
        on_log: Callable[[str], None],
        on_exit: Callable[[WorkerProcess], None],
        on_loaded: Callable[[WorkerProcess, ev.Loaded], None] | None = None,
        proc: ForkedProcess | None = None,
        python: str | None = None,
    ) -> None:
        self.name = name
        self.number = number
        self.python = python  # another interpreter's path; None: this one
        self._on_log = on_log
        self._on_exit = on_exit
        self._on_loaded = on_loaded
        self.loaded: ev.Loaded | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.returncode: int | None = None
        #: forked by the fork server (else spawned)
        self.forked = proc is not None
        self._close_requested = False
        self.proc: Proc
        if proc is not None:
            self.proc = proc
        else:
            kwargs: dict[str, Any] = {}
            if os.name == "nt":
                kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
            else:
                kwargs["start_new_session"] = True  # the terminal's Ctrl-C reaches only us; we forward it
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                # which of the variant's processes this is (0 = the first)
                env={**child_environment(), "WORKBENCH_WORKER": str(number)},
                **kwargs,
            )
        self._reader = threading.Thread(target=self._pump_stderr, daemon=True)
        self._reader.start()

    def send(self, message: dict[str, Any]) -> bool:
        """One JSON line to the worker; False when its pipe is closed (it ended)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _events(self) -> Iterator[ev.Event]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                yield ev.parse_event(line)
            except (json.JSONDecodeError, ev.EventError):
                self._on_log(line.rstrip())

    def wait_loaded(self, timeout: float | None = None) -> ev.Event | None:
        """Loaded, LoadFailed, or None when the process ended first (killed when it has not loaded
        within ``timeout`` seconds)."""
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, self._kill_unloaded)
            timer.daemon = True
            timer.start()
        try:
            for event in self._events():
                if isinstance(event, ev.Loaded):
                    self.loaded = event
                    if self._on_loaded is not None:
                        self._on_loaded(self, event)
                    return event
                if isinstance(event, ev.LoadFailed):
                    return event
            return None
        finally:
            if timer is not None:
                timer.cancel()

    def _kill_unloaded(self) -> None:
        if self.loaded is None and self.proc.poll() is None:
            self._on_log(f"{self.name}: its worker did not load in time; killed")
            self.proc.kill()

    def run(self, trials: Sequence[int], on_event: Callable[[ev.Event], None]) -> UnitOutcome:
        """Run the job's ``trials`` as one unit: ``"done"``, ``"cancelled"``, or ``"died"`` (the
        process ended)."""
        return self.ask({"run": list(trials)}, on_event)

    def ask(self, command: dict[str, Any], on_event: Callable[[ev.Event], None]) -> UnitOutcome:
        """Send one command (run trials, encode, score) and hand its events to ``on_event`` until the
        worker says it is done: ``"done"``, ``"cancelled"`` or ``"died"``."""
        if not self.send(command):
            return "died"
        for event in self._events():
            if isinstance(event, ev.UnitDone):
                return "done"
            if isinstance(event, ev.Cancelled):
                return "cancelled"
            if isinstance(event, ev.Finished):
                return "died"
            on_event(event)
        return "died"

    def request_close(self) -> None:
        """Tell the worker to close its session and end, without waiting (:meth:`close` waits): a
        pool closes all its workers at once this way, so they shut down side by side."""
        if self._close_requested or self.proc.poll() is not None:
            return
        self._close_requested = True
        self.send({"close": True})
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        """Tell the worker to close its session and end; wait for it (killed after a grace time when
        cancelled, or when it does not end)."""
        if self.proc.poll() is None:
            self.request_close()
            for event in self._events():  # drain: Finished, or the rest of a cancelled unit
                if isinstance(event, ev.Finished):
                    break
        try:
            self._reap()
        finally:
            self._on_exit(self)

    def _reap(self) -> None:
        """Wait for the process to end (killed after the grace time) and for its stderr to drain."""
        try:
            self.returncode = self.proc.wait(timeout=cancel_grace_s())
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.returncode = self.proc.wait()
        self._reader.join(timeout=5)

    def death(self) -> str:
        """Why the process ended, with its last line of output."""
        self._reap()
        assert self.returncode is not None
        how = describe_exit(self.returncode)
        if isinstance(self.proc, ForkedProcess) and self.proc.exit_unknown:
            how = "its exit status is unknown (its fork server, which would have seen it, had ended)"
        reason = f"worker process for '{self.name}' died: {how}"
        tail = [line for line in self.stderr_tail if line.strip()]
        if tail:
            reason += f"; last output: {tail[-1].strip()[:300]}"
        return reason

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line)
            self._on_log(line.rstrip("\n"))


def interrupt(proc: Proc) -> None:
    """Ask a worker to cancel (SIGINT; CTRL_BREAK on Windows): it stops its trial at the next step."""
    try:
        if os.name == "nt":
            proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        else:
            proc.send_signal(signal.SIGINT)
    except (ProcessLookupError, OSError):
        pass


def describe_exit(returncode: int) -> str:
    """A process's exit status in words (the signal that killed it, and what that usually means)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = {
            "SIGKILL": " (killed: out of memory, or stopped from outside)",
            "SIGSEGV": " (segmentation fault in native code)",
            "SIGABRT": " (aborted by native code)",
        }.get(name, "")
        return f"killed by {name}{hint}"
    return f"exit code {returncode}"
