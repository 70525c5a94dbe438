"""The desktop app and the chart module (Qt lives only here; see docs/architecture.md).

``import workbench.gui`` is cheap and imports neither Qt nor torch: it holds what the CLI and the
export need to know without Qt. :func:`workbench.gui.app.run_gui` starts the app.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["GUI_EXTRA_HINT", "TAB_NAMES", "chart_renderer", "charts_unavailable", "missing_qt"]

GUI_EXTRA_HINT = "pip install 'llm-workbench[gui]'"

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
    "conversation",
    "speedup",
    "quality",
    "acceptance",
    "memory",
    "targets",
)


def missing_qt() -> list[str]:
    """The packages the app and the charts need that are not installed (looked up, not imported)."""
    return [m for m in ("PySide6", "pyqtgraph") if importlib.util.find_spec(m) is None]


def charts_unavailable() -> str | None:
    """``None`` when charts can be drawn here, else why not."""
    missing = missing_qt()
    if missing:
        return f"drawing charts needs {' and '.join(missing)} ({GUI_EXTRA_HINT})"
    return None


def chart_renderer() -> tuple[Any, str]:
    """What ``workbench.report.export`` draws PNG and SVG with: ``(renderer, "")`` where Qt is
    installed (the GUI's chart module, an offscreen Qt application started), else ``(None, why)``."""
    reason = charts_unavailable()
    if reason is not None:
        return None, reason
    from workbench.gui import charts

    charts.ensure_app()
    return charts, ""
