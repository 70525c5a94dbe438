"""The runs in the database: open one, rename, delete (with confirmation), compare two side by side,
edit a run's spec in the builder (to change it and run again)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

__all__ = ["HistoryPanel"]

_HEADERS = ["id", "name", "status", "started (UTC)", "variants", "trials", "failed"]


class HistoryPanel(QWidget):
    openRequested = Signal(int)
    renameRequested = Signal(int)
    deleteRequested = Signal(int)
    compareRequested = Signal(int, int)
    editSpecRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = QStandardItemModel(0, len(_HEADERS), self)
        self.model.setHorizontalHeaderLabels(_HEADERS)
        self.view = QTableView()
        self.view.setObjectName("runsTable")
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.verticalHeader().setVisible(False)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(0, Qt.SortOrder.DescendingOrder)  # newest first
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.view.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.view.doubleClicked.connect(lambda _i: self._open())
        self.db_label = QLabel()
        self.db_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_btn = QPushButton("Open")
        self.rename_btn = QPushButton("Rename…")
        self.delete_btn = QPushButton("Delete…")
        self.compare_btn = QPushButton("Compare")
        self.compare_btn.setToolTip("Select two runs (Ctrl+click) to see their variants side by side")
        self.edit_spec_btn = QPushButton("Edit spec…")
        self.edit_spec_btn.setObjectName("editSpecButton")
        self.edit_spec_btn.setToolTip(
            "The spec this run was made from, in the builder: change it and run again"
        )
        self.open_btn.clicked.connect(self._open)
        self.rename_btn.clicked.connect(lambda: self._one(self.renameRequested))
        self.delete_btn.clicked.connect(lambda: self._one(self.deleteRequested))
        self.compare_btn.clicked.connect(self._compare)
        self.edit_spec_btn.clicked.connect(lambda: self._one(self.editSpecRequested))
        buttons = QHBoxLayout()
        buttons.addWidget(self.db_label, 1)
        for b in (self.open_btn, self.rename_btn, self.delete_btn, self.compare_btn, self.edit_spec_btn):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addWidget(self.view, 1)
        layout.addLayout(buttons)
        self.view.selectionModel().selectionChanged.connect(self._update_buttons)
        self._update_buttons()

    def set_runs(self, runs: list[dict[str, Any]], db_text: str) -> None:
        selected = set(self.selected_ids())
        self.db_label.setText(db_text)
        self.view.setSortingEnabled(False)
        self.model.removeRows(0, self.model.rowCount())
        for r in runs:
            values = [
                r["id"],
                r["name"],
                r["status"],
                (r["started_at"] or "")[:19].replace("T", " "),
                r["variants"],
                r["trials"],
                r["failed"],
            ]
            items = []
            for v in values:
                item = QStandardItem(str(v))
                item.setData(v, Qt.ItemDataRole.UserRole)
                if isinstance(v, int):
                    item.setData(v, Qt.ItemDataRole.DisplayRole)  # sorts as a number
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                items.append(item)
            items[0].setData(r["id"], Qt.ItemDataRole.UserRole + 1)
            self.model.appendRow(items)
        self.view.setSortingEnabled(True)
        for row in range(self.model.rowCount()):
            if self._row_id(row) in selected:
                self.view.selectRow(row)
        self._update_buttons()

    def _row_id(self, row: int) -> int:
        return int(self.model.item(row, 0).data(Qt.ItemDataRole.UserRole + 1))

    def selected_ids(self) -> list[int]:
        rows = sorted({i.row() for i in self.view.selectionModel().selectedRows()})
        return [self._row_id(r) for r in rows]

    def select_run(self, run_id: int) -> None:
        for row in range(self.model.rowCount()):
            if self._row_id(row) == run_id:
                self.view.selectRow(row)
                return

    def _update_buttons(self, *_: Any) -> None:
        n = len(self.selected_ids())
        self.open_btn.setEnabled(n == 1)
        self.rename_btn.setEnabled(n == 1)
        self.delete_btn.setEnabled(n == 1)
        self.compare_btn.setEnabled(n == 2)
        self.edit_spec_btn.setEnabled(n == 1)

    def _open(self) -> None:
        ids = self.selected_ids()
        if len(ids) == 1:
            self.openRequested.emit(ids[0])
        elif len(ids) == 2:
            self._compare()

    def _one(self, signal: Any) -> None:
        ids = self.selected_ids()
        if len(ids) == 1:
            signal.emit(ids[0])

    def _compare(self) -> None:
        ids = self.selected_ids()
        if len(ids) == 2:
            a, b = sorted(ids)
            self.compareRequested.emit(a, b)
