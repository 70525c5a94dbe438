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

__all__ = ["die_with_parent", "pid_alive"]

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
