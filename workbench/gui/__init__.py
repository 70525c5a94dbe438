"""The desktop app and the chart module (Qt lives only here; see docs/architecture.md).

``import workbench.gui`` is cheap and imports neither Qt nor torch: it holds what the CLI and the
export need to know without Qt. :func:`workbench.gui.app.run_gui` starts the app.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["GUI_EXTRA_HINT", "MAIN_TABS", "chart_renderer", "charts_unavailable", "missing_qt", "tab_names"]

GUI_EXTRA_HINT = "pip install 'llm-workbench[gui]'"

#: the main tabs of the window, as ``--tab`` names them
MAIN_TABS = ("experiment", "results", "history", "log")


def tab_names() -> tuple[str, ...]:
    """Names ``--tab`` accepts: the main tabs, then the chart tabs of the results (their names come
    from the chart kinds' list, :func:`workbench.charts.registry.chart_tabs`; Qt-free, and imported only
    when asked, so the CLI starts without the charts)."""
    from workbench.charts.registry import chart_tabs

    return (*MAIN_TABS, *(tab.name for tab in chart_tabs()))


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
