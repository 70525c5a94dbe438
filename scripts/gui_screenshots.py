"""The screenshots in docs/images/: the desktop app offscreen at 1400 × 900 on a real run.

    python scripts/gui_screenshots.py [--db RESULTS.db] [--out docs/images]

Default database: a copy of the sample run that ships in resources/sample/demo.db (one run of
``workbench demo``). Each view is shown the way a person reaches it (a tab, a menu, a button) and the
window grabbed; a popup (the table's column chooser) is painted onto the window where it opens.
``workbench gui --screenshot`` takes one such picture from the command line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SIZE = (1400, 900)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a results database (default: a copy of the sample)")
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()

    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter

    from workbench.gui.app import dispose, make_app
    from workbench.gui.smoke import sample_db

    app = make_app()
    tmp = Path(tempfile.mkdtemp(prefix="workbench-shots-"))
    os.environ["WORKBENCH_GUI_SETTINGS"] = str(tmp / "gui.ini")  # never the developer's settings
    db = args.db
    if db is None:
        db = tmp / "demo.db"
        shutil.copyfile(sample_db(), db)
    args.out.mkdir(parents=True, exist_ok=True)
    from workbench.gui.main_window import MainWindow

    def settle(seconds: float = 0.3) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.02)

    def window_on(path: Path) -> MainWindow:
        window = MainWindow(path, settings=None)
        window.resize(*SIZE)
        window.show()
        window.finish_startup()
        deadline = time.monotonic() + 60
        while window.shown_ids and window.results is None:
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for the results")
            app.processEvents()
            time.sleep(0.02)
        settle()
        return window

    def save(widget, name: str) -> None:
        path = args.out / name
        if not widget.grab().save(str(path)):
            raise SystemExit(f"cannot write {path}")
        print(path)

    # first start: an empty database
    window = window_on(tmp / "empty.db")
    save(window, "gui-welcome.png")
    window.show_tab("experiment")
    b = window.builder
    b.variant_list.setCurrentRow(1)  # the second variant, prompt lookup: its parameters
    settle()
    save(window, "gui-builder.png")
    b.remove_variant()
    b.validate()
    settle()
    save(window, "gui-builder-one-variant.png")
    window.show_tab("log")
    settle()
    save(window, "gui-log.png")
    dispose(window)

    # a real run
    window = window_on(db)
    save(window, "gui-results.png")
    sizes = window.results_split.sizes()
    window.results_split.setSizes([sum(sizes) - 130, 130])  # the chart tabs: room for the charts
    # tab, the chart scrolled to
    for tab, chart in (
        ("speedup", "speedup"),
        ("acceptance", "draft-positions"),
        ("memory", "roofline"),
        ("timeline", "timeline-chat"),
        ("conversation", "ttft-vs-turn-conversation"),
        ("quality", "quality"),
    ):
        window.show_tab(tab)
        window.charts.draw_all()
        settle(0.3)
        widget = window.charts.widgets.get(chart)
        if widget is not None:  # its top at the top of the tab
            scroll = window.charts.currentWidget()
            scroll.verticalScrollBar().setValue(widget.mapTo(scroll.widget(), QPoint(0, 0)).y())
        settle(0.3)
        save(window, f"gui-{tab}.png")
    window.results_split.setSizes(sizes)
    window.show_tab("headline")
    settle()
    # the column chooser, painted where it opens (a popup is a window of its own)
    header = window.table.horizontalHeader()
    menu = window.table.column_chooser.menu()
    at = header.mapTo(window, QPoint(header.sectionViewportPosition(3) + 20, header.height()))
    at.setY(min(at.y(), window.height() - menu.sizeHint().height() - 30))  # on screen, as Qt would
    menu.popup(window.mapToGlobal(at))
    settle()
    image = window.grab()
    painter = QPainter(image)
    painter.drawPixmap(at, menu.grab())
    painter.end()
    menu.close()
    image.save(str(args.out / "gui-columns.png"))
    print(args.out / "gui-columns.png")
    window.show_tab("history")
    window.history.select_run(window.shown_ids[0])
    settle()
    save(window, "gui-history.png")
    glossary = window.show_glossary()
    settle()
    save(glossary, "gui-glossary.png")
    glossary.close()
    first = window.shown_ids[0]
    dispose(window)
    # two runs compared (History → Compare): the run and the same run stored again, in a copy of the
    # database (a database given with --db is never written)
    copy = tmp / "compare.db"
    shutil.copyfile(db, copy)
    again = store_again(copy, first)
    window = window_on(copy)
    window.results_view.show_runs((first, again))
    deadline = time.monotonic() + 60
    while window.results is None or window.results.run_ids != (first, again):
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the comparison")
        app.processEvents()
        time.sleep(0.02)
    window.show_tab("speedup")
    window.charts.draw_all()
    settle()
    save(window, "gui-compare.png")
    dispose(window)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def store_again(db: Path, run_id: int) -> int:
    """Store run ``run_id`` of ``db`` again as a new run (its variants, trials, steps and quality
    pass; named as a copy), for a picture of two runs compared: the same measurements twice, so the
    comparison reads "no detectable change" — nothing in it is invented."""
    import sqlite3

    with sqlite3.connect(db) as conn:

        def columns(table: str) -> list[str]:
            return [r[1] for r in conn.execute(f"pragma table_info({table})") if r[1] != "id"]

        def copy(table: str, where: str, args: list[object], changes: dict[str, object]) -> dict[int, int]:
            cols = columns(table)
            key = "id" if "id" in [r[1] for r in conn.execute(f"pragma table_info({table})")] else "rowid"
            ids = {}
            for old, *values in conn.execute(
                f"select {key}, {', '.join(cols)} from {table} where {where}", args
            ):
                row = {**dict(zip(cols, values, strict=True)), **changes}
                marks = ", ".join("?" * len(row))
                cursor = conn.execute(
                    f"insert into {table} ({', '.join(row)}) values ({marks})", list(row.values())
                )
                ids[old] = cursor.lastrowid
            return ids

        (name,) = conn.execute("select name from runs where id = ?", [run_id]).fetchone()
        new = copy("runs", "id = ?", [run_id], {"name": f"{name} (stored again)"})[run_id]
        tables = [t for (t,) in conn.execute("select name from sqlite_master where type = 'table'")]
        trials = copy("trials", "run_id = ?", [run_id], {"run_id": new})
        for old, trial in trials.items():
            copy("steps", "trial_id = ?", [old], {"trial_id": trial})
        for table in tables:
            if table not in ("runs", "trials") and "run_id" in columns(table):
                copy(table, "run_id = ?", [run_id], {"run_id": new})
                if "trial_id" in columns(table):  # rows of a trial: of its copy
                    conn.executemany(
                        f"update {table} set trial_id = ? where run_id = ? and trial_id = ?",
                        [(trial, new, old) for old, trial in trials.items()],
                    )
    return new


if __name__ == "__main__":
    sys.exit(main())
