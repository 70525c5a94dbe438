"""Fresh worker processes forked from one that has already imported what a worker imports.

A fresh worker per repetition (``workers = "per-repetition"``) is what keeps a slow process from
passing for a slow variant, and it used to cost a whole start each time: a new interpreter importing
torch and transformers again (most of a small model's load: about 4 of its 5 s here), then the load,
then the warm-ups. The **fork server** cuts the imports out: it is a process of the workbench's own
interpreter that imports, once, the modules the variants' first workers imported (each first worker
lists them when it has loaded: :attr:`workbench.run.events.Loaded.modules`), and then only waits.
Each later worker is a ``fork()`` of it: a new process with its own pid, session and pipes that
loads the model itself — its own weights in its own memory, its own thread pool, as a spawned worker
— only without the imports.

Forking is safe only before a runtime has started threads: an OpenMP team, ONNX Runtime's or
llama.cpp's thread pools do not survive a fork (the children hang: ``benchmarks/fork_safety.py``).
The server imports and never computes, so no runtime has started its threads when it forks; it counts
its threads after the imports and refuses to fork (the workers are then spawned, as before) when the
imports started more than the interpreter and numpy's BLAS pool had. The parent forks only workers
of variants whose first worker ran on the CPU in this interpreter (a CUDA context must never be
forked, another ``python`` is another interpreter), only on Linux, and never in a frozen
(packaged) app; ``WORKBENCH_WORKER_START=spawn`` turns it off. A forked worker that fails to load
is started again the usual way (:mod:`workbench.run.execute`).

The protocol (a ``SOCK_SEQPACKET`` socket pair, one JSON message each way):
the parent writes the module list on the server's stdin; the server answers ``{"ready": imported,
"failed": n, "threads": t, "refused": reason-or-null}``; then per worker the parent sends
``{"env": {...}}`` with the worker's stdin, stdout and stderr pipe ends attached (``SCM_RIGHTS``) and
the server answers ``{"pid": pid}``; when a child ends the server sends ``{"exit": pid, "code": c}``
(negative: the signal that killed it, as :attr:`subprocess.Popen.returncode`). The server ends when
the parent closes the socket, after its children.

The server dies with the parent (its death signal); a forked worker ends with the run's process
too, but watches that process itself (:func:`workbench.core.lifetime.end_with`), not its parent the
server: a server that is killed (the OOM killer's pick: it holds every library imported) takes none
of its live workers with it. They finish their work; the parent then sees their end through a pidfd
(their exit status went with the server), and the workers it asks for next are spawned.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import queue
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.core.lifetime import pid_alive, process_handle, wait_handle

__all__ = ["READY_TIMEOUT_S", "ForkServer", "ForkedProcess", "fork_supported", "main"]

#: seconds the server may take to import the modules before the parent gives up on it
READY_TIMEOUT_S = 300.0
#: modules never imported in the server (this process's own entry points)
_SKIP = ("__main__", "__mp_main__")


def fork_supported() -> str | None:
    """None when workers may be forked here, else why not."""
    if not sys.platform.startswith("linux"):
        return "workers are forked only on Linux"
    if getattr(sys, "frozen", False):
        return "a packaged app spawns its workers"
    if os.environ.get("WORKBENCH_WORKER_START", "").strip().lower() == "spawn":
        return "WORKBENCH_WORKER_START=spawn"
    if not hasattr(socket, "send_fds"):
        return "this Python cannot pass file descriptors"
    return None


def _zombie(pid: int) -> bool:
    """Whether process ``pid`` has ended and waits to be reaped (by a parent that is not us)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


class ForkedProcess:
    """A worker forked by the server, as much like :class:`subprocess.Popen` as the pool needs: its
    pipes, ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``."""

    def __init__(self, pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        #: it outlived its fork server, which alone could have told its exit status (the process
        #: was re-parented): it has ended, how is unknown (``returncode`` is then 0)
        self.exit_unknown = False
        self._ended = threading.Event()
        # a handle on the process itself (a pidfd: its end is seen without being its parent), for
        # when the fork server that reports its exit has gone
        self._handle = process_handle(pid)

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()
        self._release()

    def _release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            os.close(handle)

    def _orphaned(self) -> None:
        """Its fork server has ended before it (the server was killed): watch the process itself,
        which lives on (it ends with the run's process, not with the server's)."""

        def watch() -> None:
            if self._handle is not None:
                wait_handle(self._handle)
            else:
                while pid_alive(self.pid) and not _zombie(self.pid):
                    time.sleep(0.2)
            self.exit_unknown = True
            self._exited(0)

        threading.Thread(target=watch, name=f"forked-{self.pid}", daemon=True).start()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The parent's side: start the server with ``modules`` to import (it imports them meanwhile),
    :meth:`wait_ready`, then :meth:`start` workers.

    :meth:`wait_ready` raises ``OSError`` when the server cannot start, import or answer;
    :attr:`refused` then says why it will not fork (and :meth:`start` must not be called)."""

    def __init__(self, python: str, modules: Sequence[str], env: Mapping[str, str]) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "workbench.run.forkserver", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=dict(env),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()  # one request at a time; the children's table
        self._children: dict[int, ForkedProcess] = {}
        self._early: dict[int, int] = {}  # exits that came before the proxy was made
        self.stderr_tail: list[str] = []
        self.imported = self.failed = 0
        self.refused: str | None = None
        self._ready = False
        self._gone = False  # the server has ended (its socket closed)
        self._errors = threading.Thread(target=self._pump_stderr, daemon=True)
        self._errors.start()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps([m for m in modules if m not in _SKIP]).encode())
            self.proc.stdin.close()
        except OSError:
            pass  # it ended at once: wait_ready says so

    @property
    def ready(self) -> bool:
        """Whether :meth:`wait_ready` has heard from the server."""
        return self._ready

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> ForkServer:
        """Wait until the server has imported its modules (at most ``timeout`` seconds)."""
        if self._ready:
            return self
        try:
            self._sock.settimeout(timeout)
            answer = json.loads(self._sock.recv(65536) or b"null")
            self._sock.settimeout(None)
        except (OSError, ValueError) as exc:
            self.close()
            raise OSError(f"the fork server did not start ({exc}){self._tail()}") from None
        if not isinstance(answer, dict) or "ready" not in answer:
            self.close()
            raise OSError(f"the fork server did not start{self._tail()}")
        self.imported = int(answer["ready"])
        self.failed = int(answer.get("failed") or 0)
        self.refused = answer.get("refused")
        self._ready = True
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _tail(self) -> str:
        self._errors.join(timeout=1)
        return f": {self.stderr_tail[-1].strip()}" if self.stderr_tail else ""

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-19:], raw.decode("utf-8", "replace")]

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "exit" in message:
                pid, code = int(message["exit"]), int(message["code"])
                with self._lock:
                    child = self._children.pop(pid, None)
                    if child is None:
                        self._early[pid] = code
                if child is not None:
                    child._exited(code)
            else:
                self._replies.put(message)
        # the server is gone (closed, or killed): its live children go on (they end with the run's
        # process, not with the server), and are watched directly from now on
        self._replies.put({"error": "the fork server ended"})  # first: a start() may hold the lock
        with self._lock:
            self._gone = True
            orphans = list(self._children.values())
            self._children.clear()
        for child in orphans:
            child._orphaned()

    def _ended(self) -> str:
        """Why the server is gone, in words."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the fork server stopped answering"
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        return f"the fork server ended ({how})"

    def start(self, env: Mapping[str, str]) -> ForkedProcess:
        """Fork one worker with environment ``env``; its pipes as text streams, as the pool's
        spawned workers have them. Raises ``OSError`` when the server cannot fork."""
        self.wait_ready()
        if self.refused:
            raise OSError(f"the fork server does not fork: {self.refused}")
        if self._gone:
            raise OSError(self._ended())
        ends = [os.pipe() for _ in range(3)]  # (read, write) each: the child's stdin, stdout, stderr
        theirs = [ends[0][0], ends[1][1], ends[2][1]]
        ours = [ends[0][1], ends[1][0], ends[2][0]]
        try:
            with self._lock:
                socket.send_fds(self._sock, [json.dumps({"env": dict(env)}).encode()], theirs)
                reply = self._replies.get(timeout=60)
                pid = reply.get("pid")
                if not isinstance(pid, int):
                    raise OSError(self._ended() if self._gone else reply.get("error") or "it did not fork")
                text: dict[str, Any] = {"encoding": "utf-8", "errors": "replace"}
                # the streams live as long as the worker: closed by the pool, not here
                child = ForkedProcess(
                    pid,
                    open(ours[0], "w", buffering=1, **text),  # noqa: SIM115
                    open(ours[1], **text),  # noqa: SIM115
                    open(ours[2], **text),  # noqa: SIM115
                )
                ours = []
                if pid in self._early:
                    child._exited(self._early.pop(pid))
                elif self._gone:  # the server ended since it answered: nobody will report
                    child._orphaned()
                else:
                    self._children[pid] = child
            return child
        except queue.Empty:
            raise OSError("the fork server did not answer") from None
        except OSError as exc:  # it ended while we asked (a broken pipe)
            raise OSError(self._ended() if self._gone or self.proc.poll() is not None else str(exc)) from None
        finally:
            for fd in theirs + ours:
                os.close(fd)

    def close(self) -> None:
        """End the server (it ends once its live children have: they are the run's workers)."""
        with contextlib.suppress(OSError):  # shutdown, not only close: it wakes our reader's recv
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the server ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.core.lifetime import die_with_parent

    args = list(sys.argv[1:] if argv is None else argv)
    runner = os.getppid()  # the run's process: the one our children watch
    die_with_parent()  # the runner is gone: so are we (our children watch the runner themselves)
    sock = socket.socket(fileno=int(args[0]))
    modules = json.loads(sys.stdin.buffer.read() or b"[]")
    base = _threads()
    with contextlib.suppress(ImportError):
        import numpy  # noqa: F401  (its BLAS pool, fork-safe: OpenBLAS re-forms it in a child)
    allowed = max(base, _threads())
    failed = 0
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException:  # a module that imports only where it was first imported
            failed += 1
    now = _threads()
    refused = None
    if now > allowed:
        refused = f"its imports started {now - allowed} thread(s) (a runtime that cannot be forked)"
    answer = {"ready": len(modules) - failed, "failed": failed, "threads": now, "refused": refused}
    sock.sendall(json.dumps(answer).encode())
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    live: set[int] = set()
    open_ = True
    while open_ or live:
        for key, _ in selector.select(timeout=1.0 if not open_ else None):
            if key.fileobj is sock:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 3)
                except OSError:
                    data, fds = b"", []
                if not data:
                    open_ = False
                    selector.unregister(sock)
                    continue
                request = json.loads(data)
                pid = os.fork()
                if pid == 0:
                    _child(sock, (wake_r, wake_w), fds, request, runner)  # never returns
                for fd in fds:
                    os.close(fd)
                live.add(pid)
                sock.sendall(json.dumps({"pid": pid}).encode())
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
        while live:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                live.clear()
                break
            if pid == 0:
                break
            live.discard(pid)
            if open_:
                try:
                    code = os.waitstatus_to_exitcode(status)
                    sock.sendall(json.dumps({"exit": pid, "code": code}).encode())
                except OSError:
                    open_ = False
    return 0


def map_inherited_pages(parent: int) -> int:
    """Map into this (forked) process the pages of read-only file mappings — the libraries' code and
    constants — that ``parent`` has mapped; returns how many.

    ``fork()`` copies the page-table entries of anonymous memory but not of such file mappings: the
    kernel fills those on first touch. A forked worker would so count in its RSS only the library
    pages it touches itself, while a spawned worker counts every page its imports touched, and the
    per-trial peak memory (the RSS high-water mark) of the two would differ by tens of MB for the
    same model. Touching the parent's mapped pages once (a minor fault each: they are in the page
    cache) makes a forked worker's RSS what a spawned worker with the same imports has."""
    try:
        import numpy as np
    except ImportError:
        return 0
    page = os.sysconf("SC_PAGE_SIZE")
    touched = 0
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            lines = maps.read().splitlines()
        with open(f"/proc/{parent}/pagemap", "rb") as pagemap:
            for line in lines:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or fields[4] == "0" or not fields[5].startswith("/"):
                    continue
                perms, path = fields[1], fields[5]
                if (
                    not perms.startswith("r")
                    or "w" in perms
                    or perms.endswith("s")
                    or path.startswith("/dev/")
                ):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                pagemap.seek(start // page * 8)
                entries = np.frombuffer(pagemap.read((end - start) // page * 8), dtype=np.uint64)
                present = np.flatnonzero(entries >> np.uint64(63))
                if present.size:
                    memory = np.ctypeslib.as_array((ctypes.c_ubyte * (end - start)).from_address(start))
                    int(memory[present * page].sum())  # one read a page: mapped now
                    touched += int(present.size)
    except (OSError, ValueError):
        pass  # no pagemap to read (another kernel, a container's /proc): the RSS is just lower
    return touched


def _child(
    sock: socket.socket, wake: tuple[int, int], fds: Sequence[int], request: dict[str, Any], runner: int
) -> None:
    """In the forked child: become a worker of ``runner`` (the run's process) on the pipes that came
    with the request; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        os.setsid()  # as a spawned worker: the terminal's Ctrl-C reaches only the runner
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        text: dict[str, Any] = {"encoding": "utf-8", "errors": "replace", "closefd": False}
        sys.stdin = open(0, **text)  # noqa: SIM115 (the process's own streams)
        sys.stdout = open(1, "w", buffering=1, **text)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, **text)  # noqa: SIM115
        random.seed()  # not the server's sequence
        map_inherited_pages(os.getppid())
        from workbench.run import worker

        sys.argv = [worker.__file__]  # as a spawned worker's

        code = worker.main(runner)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
