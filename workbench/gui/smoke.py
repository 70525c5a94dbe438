"""``--smoke``: does this install (a packaged viewer above all) open a database and draw its charts?

Opens a results database — by default a copy of the sample that ships in ``resources/sample/`` (the
demo's run; copied because the installed one sits in a read-only folder and SQLite writes beside a
database it opens) — in the main window in viewer mode, offscreen, waits until the latest run is
analysed, exports its headline chart as a PNG the way ``Ctrl+E`` does, reads the file back, checks
that Qt found a real font (with none it draws every letter as a box and says nothing), prints one
line and returns. Any failure is a :class:`~workbench.core.errors.WorkbenchError` (one ``Error:`` line).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.formatting import duration

__all__ = ["MIN_COLOURS", "run_smoke", "sample_db"]

#: a drawn headline chart has anti-aliased text and bars in several colours; a blank or failed
#: render has one or two
MIN_COLOURS = 16


def sample_db() -> Path:
    """The sample results database that ships with the app (``workbench demo``'s run)."""
    from workbench.core.resources import resource_path

    return resource_path("sample", "demo.db")


def run_smoke(db: Path | None = None) -> str:
    """Run the check on ``db`` (default: a copy of the sample); returns the one-line summary."""
    started = time.monotonic()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory(prefix="workbench-smoke-") as tmp:
        work = Path(tmp)
        if db is None:
            source = sample_db()
            if not source.is_file():
                raise WorkbenchError(f"smoke test: the sample database is missing ({source})")
            db = work / source.name
            shutil.copyfile(source, db)
        elif not db.is_file():
            raise WorkbenchError(f"smoke test: no results database at {db}")
        return _check(db, work / "headline.png", started)


def _check(db: Path, png: Path, started: float) -> str:
    from PySide6 import __version__ as pyside_version
    from PySide6.QtGui import QFontDatabase, QFontInfo, QGuiApplication, QImage

    from workbench import __version__
    from workbench.gui.app import dispose, make_app, wait_for
    from workbench.gui.main_window import MainWindow, viewer_reason
    from workbench.store import Store

    app = make_app()
    family = QFontInfo(app.font()).family()
    if not family or family not in QFontDatabase.families():
        raise WorkbenchError(
            "smoke test: Qt found no font, so every letter would be drawn as a box; install one "
            "(Debian/Ubuntu: apt install fonts-dejavu-core; Fedora: dnf install dejavu-sans-fonts)"
        )
    Store(db, create=False).close()  # not a database, or not ours: its own one-line error
    window = MainWindow(db, settings=None, viewer=viewer_reason(True), open_run="latest")
    try:
        window.resize(1400, 900)
        window.show()
        window.finish_startup()
        if window.last_message:
            raise WorkbenchError(f"smoke test: {window.last_message}")
        if not window.state.shown_ids:
            raise WorkbenchError(f"smoke test: {db} holds no runs")
        wait_for(app, lambda: window.state.results is not None, timeout_s=120)
        if window.last_message:
            raise WorkbenchError(f"smoke test: {window.last_message}")
        data = window.state.results
        assert data is not None  # waited for above
        headline = next((c for c in data.charts if c.key == "headline"), None)
        if headline is None:
            raise WorkbenchError(f"smoke test: run {data.run_ids[0]} has no finished trials to chart")
        window.show_tab("headline")
        for _ in range(5):  # the chart panel draws one chart per turn of the event loop
            app.processEvents()
        if window.export_actions.export_chart(headline, "png", path=png) is None:
            raise WorkbenchError(f"smoke test: exporting the headline chart failed: {window.last_message}")
        image = QImage(str(png))
        if image.isNull():
            raise WorkbenchError(f"smoke test: the exported headline chart {png.name} is not a PNG")
        colours = _colours(image)
        if colours < MIN_COLOURS:
            raise WorkbenchError(f"smoke test: the headline chart came out blank ({colours} colours)")
        run = data.runs[0]
        variants = len({s.variant for s in data.summaries})
        workloads = len({s.workload for s in data.summaries})
        measured = sum(1 for t in data.trials if not t.warmup and t.status == "ok")
    finally:
        dispose(window)
    return (
        f"smoke ok: Workbench {__version__} (PySide6 {pyside_version}, {QGuiApplication.platformName()}), "
        f'run {run["id"]} "{run["name"]}" from {db.name}: {variants} variants × {workloads} workloads, '
        f"{measured} trials; headline chart {image.width()}×{image.height()} px, {colours} colours; "
        f'font "{family}"; {duration(time.monotonic() - started, 1)}'
    )


def _colours(image: object, limit: int = 4096) -> int:
    """Distinct colours in ``image`` (a QImage), sampled on a grid; stops counting at ``limit``."""
    width, height = image.width(), image.height()  # type: ignore[attr-defined]
    seen: set[int] = set()
    step = max(1, min(width, height) // 200)
    for y in range(0, height, step):
        for x in range(0, width, step):
            seen.add(image.pixel(x, y))  # type: ignore[attr-defined]
            if len(seen) >= limit:
                return len(seen)
    return len(seen)
