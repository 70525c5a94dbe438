"""File → Export…: the chart on screen (PNG or SVG, or to the clipboard), the HTML report, the run's
data files, everything `workbench export` writes.

Every export works from what the Results tab holds (``state.results``: the run's analysis and its
charts, computed in the loader's child process): nothing is analysed again on the UI thread. Charts
are drawn with Qt, so that part runs here, under a wait cursor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QStatusBar, QWidget

if TYPE_CHECKING:
    from workbench.analysis.compare import TwoRuns
    from workbench.analysis.run import RunAnalysis
    from workbench.charts.base import Chart
    from workbench.gui.chartview import ChartPanel
    from workbench.gui.state import AppState

__all__ = ["ExportActions", "ExportWindow", "busy"]


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """A wait cursor while the UI thread renders (chart export draws with Qt, so it runs here)."""
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        yield
    finally:
        QApplication.restoreOverrideCursor()


class ExportWindow(Protocol):
    """What :class:`ExportActions` uses of the window (:class:`~workbench.gui.main_window.MainWindow`)."""

    state: AppState  # its results (what the Results tab shows) are what is exported
    charts: ChartPanel | None  # None until start-up has finished

    def window(self) -> QWidget: ...  # QWidget.window(): the parent of the dialogs
    def statusBar(self) -> QStatusBar: ...
    def show_error(self, title: str, message: str) -> None: ...
    def log_line(self, line: str) -> None: ...
    def last_dir(self) -> str: ...
    def remember_dir(self, path: Path) -> None: ...


class ExportActions:
    """The export actions of ``window`` (its state's results and store, status bar, messages)."""

    def __init__(self, window: ExportWindow) -> None:
        self.window = window

    def export_current_chart(self, *_: object, path: Path | None = None) -> Path | None:
        chart = self._chart_or_complain()
        if chart is None:
            return None
        return self.export_chart(chart, "png", path=path)

    def export_chart(self, chart: Chart, kind: str = "png", *, path: Path | None = None) -> Path | None:
        """Ask where (PNG or SVG, by the filter chosen), then write exactly what `workbench export` does."""
        from workbench.gui.chartview import export_chart

        w = self.window
        if path is None:
            filters = "PNG image, 2x (*.png);;SVG image (*.svg)"
            selected = "SVG image (*.svg)" if kind == "svg" else "PNG image, 2x (*.png)"
            start = str(Path(w.last_dir()) / f"{chart.name}.{kind}")
            chosen, used = QFileDialog.getSaveFileName(w.window(), "Export chart", start, filters, selected)
            if not chosen:
                return None
            path = Path(chosen)
            if path.suffix.lower() not in (".png", ".svg"):
                path = path.with_suffix(".svg" if used.startswith("SVG") else ".png")
        try:
            with busy():
                written = export_chart(chart, path)
        except OSError as exc:
            w.show_error("Export chart", f"cannot write {path}: {exc.strerror or exc}")
            return None
        self._wrote(path, f"Wrote {written}", f"exported chart {chart.name} to {written}")
        return written

    def copy_current_chart(self, *_: object) -> bool:
        from workbench.gui.chartview import copy_chart

        chart = self._chart_or_complain()
        if chart is None:
            return False
        with busy():
            copy_chart(chart)
        self.window.statusBar().showMessage(f"Copied the {chart.title or chart.name} chart", 5000)
        return True

    def export_report(self, *_: object, path: Path | None = None) -> Path | None:
        """The HTML report of the run on screen (what `workbench export --format html` writes); of two
        runs compared, their comparison (what `workbench compare A B --out DIR` writes as report.html)."""
        from workbench.gui import charts as qt_charts
        from workbench.report.documents import html_report

        w, results = self.window, self.window.state.results
        if results is not None and results.two_runs is not None:
            return self._export_comparison_report(results.two_runs, results.charts, path)
        one = self._one_run("Export report")
        if one is None:
            return None
        analysis, charts = one
        if path is None:
            path = self._ask_html_path(f"report-run{analysis.run.id}.html")
            if path is None:
                return None
        try:
            with busy():
                # the analysis and charts the Results tab holds: nothing is analysed again here
                pngs = {c.name: qt_charts.png_bytes(c) for c in charts}
                path.write_text(html_report(analysis, pngs, charts), encoding="utf-8")
        except OSError as exc:
            w.show_error("Export report", f"cannot write {path}: {exc.strerror or exc}")
            return None
        self._wrote(path, f"Wrote {path}", f"exported the report of run {analysis.run.id} to {path}")
        return path

    def _ask_html_path(self, name: str) -> Path | None:
        """The report's file, asked for in the last folder used (``.html`` added); None if cancelled."""
        w = self.window
        start = str(Path(w.last_dir()) / name)
        chosen, _filter = QFileDialog.getSaveFileName(
            w.window(), "Export report", start, "HTML page (*.html)"
        )
        if not chosen:
            return None
        return Path(chosen if chosen.endswith((".html", ".htm")) else chosen + ".html")

    def _export_comparison_report(
        self, two: TwoRuns, shown: Sequence[Chart], path: Path | None
    ) -> Path | None:
        from workbench.gui import charts as qt_charts
        from workbench.report.comparison import comparison_html

        w = self.window
        a, b = two.ids
        if path is None:
            path = self._ask_html_path(f"report-run{b}-vs-run{a}.html")
            if path is None:
                return None
        try:
            with busy():  # the comparison the Results tab holds: nothing is analysed again here
                pngs = {c.name: qt_charts.png_bytes(c) for c in shown}
                path.write_text(comparison_html(two, shown, pngs), encoding="utf-8")
        except OSError as exc:
            w.show_error("Export report", f"cannot write {path}: {exc.strerror or exc}")
            return None
        self._wrote(path, f"Wrote {path}", f"exported the comparison of run {b} against run {a} to {path}")
        return path

    def _export_into(
        self,
        out_dir: Path | None,
        title: str,
        export: Callable[[Path], tuple[list[Path], list[str]]],
        what: str,
    ) -> list[Path]:
        """Ask for a folder unless ``out_dir`` is given, run ``export(out_dir)`` (→ the files written,
        notes) busy, show an error in one line, say what was written (``what``: for the log)."""
        from workbench.core.errors import WorkbenchError

        w = self.window
        if out_dir is None:
            chosen = QFileDialog.getExistingDirectory(w.window(), title, w.last_dir())
            if not chosen:
                return []
            out_dir = Path(chosen)
        try:
            with busy():
                written, _notes = export(out_dir)
        except WorkbenchError as exc:
            w.show_error("Export", str(exc))
            return []
        report = out_dir / "report.html"
        self._wrote(
            out_dir / "x",
            f"Wrote {len(written)} files to {out_dir}" + (" — open report.html" if report in written else ""),
            f"exported {what} to {out_dir}: {len(written)} files",
        )
        return list(written)

    def _export_comparison(
        self, two: TwoRuns, shown: Sequence[Chart], out_dir: Path | None, formats: Sequence[str] | None = None
    ) -> list[Path]:
        """What `workbench compare A B --out DIR` writes (``formats``: ("csv",) for the data only), with
        the charts on screen (``shown``: the same list)."""
        from workbench.gui import charts as qt_charts
        from workbench.report.comparison import export_comparison

        a, b = two.ids
        return self._export_into(
            out_dir,
            f"Export run {b} against run {a} into",
            lambda folder: export_comparison(two, folder, formats, renderer=qt_charts, charts=shown),
            f"the comparison of run {b} against run {a}",
        )

    def export_all(self, *_: object, out_dir: Path | None = None) -> list[Path]:
        """Everything `workbench export RUN --out DIR` writes (charts, data, Markdown, HTML); of two runs
        compared, what `workbench compare A B --out DIR` writes."""
        from workbench.gui import charts as qt_charts
        from workbench.report.export import export_run

        results, store = self.window.state.results, self.window.state.store
        if results is not None and results.two_runs is not None:
            return self._export_comparison(results.two_runs, results.charts, out_dir)
        one = self._one_run("Export")
        if one is None or store is None:
            return []
        analysis, charts = one
        # the analysis and charts the Results tab holds: nothing is analysed again here
        return self._export_into(
            out_dir,
            "Export the run into",
            lambda folder: export_run(
                store, analysis.run.id, folder, renderer=qt_charts, analysis=analysis, charts=charts
            ),
            f"run {analysis.run.id}",
        )

    def export_data(self, *_: object, out_dir: Path | None = None) -> list[Path]:
        """The run's data files (CSV, summary.json, every chart's data), as `workbench export` writes them."""
        from workbench.core.errors import WorkbenchError
        from workbench.report.export import export_data

        w, results, store = self.window, self.window.state.results, self.window.state.store
        if results is not None and results.two_runs is not None:
            return self._export_comparison(results.two_runs, results.charts, out_dir, ("csv",))
        if results is None or len(results.run_ids) != 1 or store is None:
            w.show_error("Export", "Open a run first (History tab).")
            return []
        if out_dir is None:
            chosen = QFileDialog.getExistingDirectory(w.window(), "Export the run's data into", w.last_dir())
            if not chosen:
                return []
            out_dir = Path(chosen)
        try:
            # the analysis and charts the Results tab holds: nothing is analysed again here
            written = export_data(
                store, results.run_ids[0], out_dir, analysis=results.analysis, charts=results.charts
            )
        except WorkbenchError as exc:
            w.show_error("Export", str(exc))
            return []
        self._wrote(out_dir / "x", f"Wrote {', '.join(p.name for p in written)} to {out_dir}")
        return written

    def _one_run(self, title: str) -> tuple[RunAnalysis, list[Chart]] | None:
        """The analysis and charts on screen when they are one run's; else None, and says so."""
        results = self.window.state.results
        if results is None or results.analysis is None:
            self.window.show_error(title, "Open a run first (History tab), or two to compare them.")
            return None
        return results.analysis, results.charts

    def _chart_or_complain(self) -> Chart | None:
        w = self.window
        chart = w.charts.current_chart() if w.charts is not None and w.state.results is not None else None
        if chart is None:
            w.show_error("Export chart", "No chart on screen: open a run with finished trials first.")
        return chart

    def _wrote(self, path: Path, status: str, log: str | None = None) -> None:
        """After a successful export: remember the folder for the next dialog, say so in the status
        bar (and the log)."""
        self.window.remember_dir(path)
        self.window.statusBar().showMessage(status, 8000)
        if log:
            self.window.log_line(log)
