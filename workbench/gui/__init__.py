"""The desktop app and the chart module (Qt lives only here; see docs/architecture.md).

``import workbench.gui`` is cheap and imports neither Qt nor torch; :func:`run_gui` starts the app.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TAB_NAMES", "run_gui"]

#: names ``--tab`` accepts: the main tabs, then the chart tabs of the results (here, Qt-free, so the
#: CLI can offer them without importing Qt)
TAB_NAMES = (
    "experiment",
    "results",
    "history",
    "log",
    "headline",
    "timeline",
    "sweeps",
    "speedup",
    "acceptance",
    "memory",
)


def run_gui(*args: Any, **kwargs: Any) -> int:
    """Open the main window (see :func:`workbench.gui.app.run_gui`); returns the exit code."""
    from workbench.gui.app import run_gui as _run_gui

    return _run_gui(*args, **kwargs)
