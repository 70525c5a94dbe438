"""The results table: metrics per variant × workload with speed-ups, acceptance, match, prefill share
and phase, sortable, with one-sentence tooltips. Its data comes from :mod:`workbench.gui.loading`.

By default it shows the columns a person reads first (:data:`DEFAULT_COLUMNS`, the CLI main table's);
the rest are behind the header's context menu (a check box per column, "Show all"), and the choice is
kept in the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView, QWidget

from workbench.gui.glossary import explain
from workbench.report.columns import COLUMNS as TABLE_COLUMNS
from workbench.report.columns import Cell, targets_cell, targets_text

__all__ = [
    "COLUMNS",
    "DEFAULT_COLUMNS",
    "ColumnChooser",
    "GuiColumn",
    "SummaryTableModel",
    "make_table_view",
    "targets_text",
]


# -- the table ----------------------------------------------------------------------------------


class GuiColumn(NamedTuple):
    """A column of the table: its header (the column's long label), the glossary term for its tooltip
    and its cell (None: filled from the experience targets' verdicts)."""

    header: str
    term: str
    cell: Cell | None


#: the table's columns in order, from :data:`workbench.report.columns.COLUMNS` (the CLI's main table
#: takes its cells from the same definitions)
_KEYS = (
    "variant",
    "workload",
    "n",
    "input_tokens",
    "output_tokens",
    "ttft_ms",
    "prefill_tokens_per_s",
    "tpot_ms",
    "decode_tokens_per_s",
    "itl_p50_ms",
    "itl_p90_ms",
    "e2e_ms",
    "peak_memory_mb",
    "prefill_share",
    "phase",  # the row's own, from its prefill share (the workload's: the tooltip)
    "speedup_e2e",
    "mde",
    "speedup_ttft",
    "speedup_decode",
    "acceptance",
    "match",
    "kld",
    "same_top",
    "targets",  # filled from the experience targets' verdicts (per variant × workload)
)
#: (header, glossary term for the tooltip, cell -> (text, sort value))
COLUMNS: list[GuiColumn] = [GuiColumn(c.long, c.glossary, c.cell) for c in (TABLE_COLUMNS[k] for k in _KEYS)]

#: shown until a person chooses (≤ 10, ~1400 px): the columns of the CLI's main table without --wide
DEFAULT_COLUMNS = tuple(
    TABLE_COLUMNS[k].long
    for k in (
        "variant",
        "workload",
        "ttft_ms",
        "decode_tokens_per_s",
        "e2e_ms",
        "speedup_e2e",
        "speedup_ttft",
        "speedup_decode",
        "match",
        "kld",
    )
)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_TEXT_COLUMNS = {i for i, k in enumerate(_KEYS) if TABLE_COLUMNS[k].words}
_PHASE = _KEYS.index("phase")


class SummaryTableModel(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []
        self._cells: list[list[tuple[str, Any]]] = []
        self._phases: dict[str, str] = {}

    def set_summaries(
        self,
        summaries: Sequence[Any],
        phases: dict[str, str] | None = None,
        verdicts: Sequence[Any] = (),
    ) -> None:
        """``phases``: workload → its measured phase label (``decode-heavy``...); ``verdicts``: the
        experience targets' :class:`~workbench.analysis.targets.Verdict` per variant × workload."""
        phases = phases or {}
        by_group = {(v.variant, v.workload): v for v in verdicts}

        def cells(s: Any) -> list[tuple[str, Any]]:
            return [
                cell(s) if cell is not None else targets_cell(by_group.get((s.variant, s.workload)))
                for _, _, cell in COLUMNS
            ]

        self._phases = phases
        self.beginResetModel()
        self._rows = list(summaries)
        self._cells = [cells(s) for s in self._rows]
        self.endResetModel()

    def summary(self, row: int) -> Any:
        return self._rows[row]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if not index.isValid():
            return None
        text, value = self._cells[index.row()][index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return text
        if role == SORT_ROLE:
            if value is None:
                return "" if isinstance(text, str) and index.column() in _TEXT_COLUMNS else float("-inf")
            return value
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() not in _TEXT_COLUMNS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and text and COLUMNS[index.column()][1]:
            tip = explain(COLUMNS[index.column()][1])
            workload = self._rows[index.row()].workload
            if index.column() == _PHASE and self._phases.get(workload):
                tip = f"This row's own phase. The workload {workload}: {self._phases[workload]} (the baseline's).\n\n{tip}"
            return tip
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        header, term, _ = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:  # two short lines ("e2e / speed-up"): narrow columns
            return header.replace(" ", "\n", 1) if len(header) > 8 else header
        if role == Qt.ItemDataRole.ToolTipRole:
            return (explain(term) + "\n\n" if term else "") + "Right-click a header to choose the columns."
        return None


class ColumnChooser:
    """The header's context menu of a table view: a check box per column, "Show all", "First-read
    columns"; the visible columns are kept in ``settings`` (a :class:`~workbench.gui.settings.GuiSettings`,
    or None: not kept)."""

    def __init__(self, view: QTableView, settings: Any = None) -> None:
        self.view = view
        self.settings = settings
        header = view.horizontalHeader()
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(lambda _pos: self.menu().exec(QCursor.pos()))
        saved = settings.table_columns if settings is not None else None
        known = [c for c in (saved or ()) if c in _HEADERS]
        self.set_visible(known or DEFAULT_COLUMNS, remember=False)

    def visible(self) -> list[str]:
        return [h for i, h in enumerate(_HEADERS) if not self.view.isColumnHidden(i)]

    def set_visible(self, names: Sequence[str], *, remember: bool = True) -> None:
        wanted = set(names) or {_HEADERS[0]}  # never no column at all
        for i, header in enumerate(_HEADERS):
            self.view.setColumnHidden(i, header not in wanted)
        if remember and self.settings is not None:
            self.settings.table_columns = self.visible()

    def toggle(self, name: str, on: bool) -> None:
        names = [h for h in self.visible() if h != name] + ([name] if on else [])
        self.set_visible(names)

    def menu(self) -> QMenu:
        menu = QMenu(self.view)
        menu.setObjectName("columnChooser")
        shown = set(self.visible())
        for header, term, _ in COLUMNS:
            action = menu.addAction(header)
            action.setCheckable(True)
            action.setChecked(header in shown)
            action.setToolTip(explain(term))
            action.setEnabled(not (header in shown and len(shown) == 1))  # the last one stays
            action.toggled.connect(lambda on, h=header: self.toggle(h, on))
        menu.setToolTipsVisible(True)
        menu.addSeparator()
        menu.addAction("Show all", lambda: self.set_visible(_HEADERS))
        menu.addAction("First-read columns only", lambda: self.set_visible(DEFAULT_COLUMNS))
        return menu


_HEADERS = [header for header, _, _ in COLUMNS]


def make_table_view(
    model: SummaryTableModel, parent: QWidget | None = None, *, settings: Any = None
) -> QTableView:
    """A sortable view of ``model`` with its column chooser (``view.column_chooser``); ``settings``
    keeps the chosen columns between starts."""
    proxy = QSortFilterProxyModel(parent)
    proxy.setSourceModel(model)
    proxy.setSortRole(SORT_ROLE)
    view = QTableView(parent)
    view.setModel(proxy)
    view.setSortingEnabled(True)
    view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # run order until a header is clicked
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    view.horizontalHeader().setStretchLastSection(True)
    view.column_chooser = ColumnChooser(view, settings)  # type: ignore[attr-defined]
    return view
