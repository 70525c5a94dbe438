"""Process lifetimes: a child process that ends with its parent (the run workers and the GUI's results
loader use it), and whether a process is still there (the store's stale runs, the GPTQ cache's stale
staging folders).

Without :func:`die_with_parent`, a child whose parent is killed (SIGKILL, a crash, an OOM kill) is
re-parented to init and goes on — computing a trial nobody will record, or waiting for work on a pipe
it holds both ends of. Imports nothing of ours.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["die_with_parent", "end_with", "pid_alive", "process_handle", "wait_handle"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; elsewhere nothing).

    Call it early in the child. The kernel sends the signal when the *thread* that started this
    process ends, so the parent should start its children from a thread that lives as long as it
    does. Returns False when ``parent_pid`` is given and this process's parent is no longer that
    process: the parent died before the request was made, and no signal will ever come (the caller
    should exit). True otherwise.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
        except (OSError, AttributeError):
            pass
    return parent_pid is None or os.getppid() == parent_pid


def process_handle(pid: int) -> int | None:
    """A pidfd for process ``pid`` (any process, not only a child: readable once it has ended), or
    None where there is none (not Linux 5.3+, or the process has already gone)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def wait_handle(handle: int, timeout: float | None = None) -> bool:
    """Wait until the process behind pidfd ``handle`` has ended (True), or ``timeout`` seconds."""
    import select

    readable, _, _ = select.select([handle], [], [], timeout)
    return bool(readable)


def end_with(pid: int, sig: int = signal.SIGTERM) -> bool | None:
    """Have this process sent ``sig`` when process ``pid`` ends — a process that is not its parent
    (:func:`die_with_parent` only watches the parent): a daemon thread blocked on ``pid``'s pidfd,
    which costs no CPU until then. None where a process cannot be watched so (the caller falls back
    to :func:`die_with_parent`); False when ``pid`` has already ended (the caller should exit)."""
    handle = process_handle(pid)
    if handle is None:
        return False if not pid_alive(pid) and hasattr(os, "pidfd_open") else None
    if wait_handle(handle, 0):
        os.close(handle)
        return False

    def watch() -> None:
        wait_handle(handle)
        os.kill(os.getpid(), sig)

    import threading

    threading.Thread(target=watch, name="end-with", daemon=True).start()
    return True


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists. Another user's process counts, and so does one we cannot tell
    about: the caller then leaves alone what that process may still own."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: exists, but another user's
        return True
    return True
