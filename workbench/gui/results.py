"""The results table: metrics per variant × workload with speed-ups, acceptance, match, prefill share
and phase, sortable, with one-sentence tooltips. Its data comes from :mod:`workbench.gui.loading`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from workbench.gui.glossary import explain

__all__ = ["COLUMNS", "SummaryTableModel", "make_table_view"]


# -- the table ----------------------------------------------------------------------------------


def _metric(name: str, digits: int) -> Callable[[Any], tuple[str, float | None]]:
    def get(s: Any) -> tuple[str, float | None]:
        est = s.metrics.get(name)
        value = est.value if est is not None else None
        return ("–" if value is None else f"{value:,.{digits}f}", value)

    return get


def _ratio(attr: str) -> Callable[[Any], tuple[str, float | None]]:
    def get(s: Any) -> tuple[str, float | None]:
        est = getattr(s, attr)
        if est is None or est.value is None:
            return ("", None)
        text = f"{est.value:.2f}x"
        if est.lo is not None:
            text += f" [{est.lo:.2f}–{est.hi:.2f}]"
            if not est.lo <= 1.0 <= est.hi:
                text += " *"
        return (text, est.value)

    return get


def _prefill_share(s: Any) -> tuple[str, float | None]:
    ttft, e2e = s.metrics["ttft_ms"].value, s.metrics["e2e_ms"].value
    if ttft is None or not e2e:
        return ("", None)
    share = ttft / e2e
    return (f"{share:.0%}", share)


def _acceptance(s: Any) -> tuple[str, float | None]:
    if s.acceptance_rate is None:
        return ("", None)
    text = f"{s.acceptance_rate:.0%}"
    if s.mean_accepted_length is not None:
        text += f" ({s.mean_accepted_length:.1f} tok/step)"
    return (text, s.acceptance_rate)


def _match(s: Any) -> tuple[str, float | None]:
    if s.matches_baseline is None:
        return ("", None)
    text = f"{s.matches_baseline:.0%}"
    if s.matches_baseline < 1 and s.match_fraction is not None:
        text += f" ({s.match_fraction:.0%} tok)"
    return (text, s.matches_baseline)


def _kld(s: Any) -> tuple[str, float | None]:
    """KLD from the baseline (sorts lossless and the reference first, unscored last)."""
    from workbench.report.quality import quality_cells

    q = s.quality or {}
    text = quality_cells(s)[0]
    if q.get("status") == "scored":
        return (text, q["kld_mean"])
    return (text, 0.0 if q.get("status") in ("reference", "lossless") else None)


def _same_top(s: Any) -> tuple[str, float | None]:
    q = s.quality or {}
    if q.get("status") != "scored":
        return ("", None)
    return (f"{q['same_top']:.0%}", q["same_top"])


def _n(s: Any) -> tuple[str, float | None]:
    text = f"{s.n_ok}" + (f" ({s.n_failed} failed)" if s.n_failed else "")
    if s.n_disturbed:
        text += f" ({s.n_disturbed} disturbed{', left out' if s.disturbed_excluded else ''})"
    return (text, float(s.n_ok))


def _mde(s: Any) -> tuple[str, float | None]:
    mde = getattr(s.speedup_e2e, "mde", None)
    return ("", None) if mde is None else (f"±{mde:.1%}", mde)


#: (header, glossary term for the tooltip, getter -> (text, sort value))
COLUMNS: list[tuple[str, str, Callable[[Any], tuple[str, Any]] | None]] = [
    ("variant", "", lambda s: (s.variant, s.variant)),
    ("workload", "", lambda s: (s.workload, s.workload)),
    ("n", "disturbed", _n),
    ("in tok", "", _metric("input_tokens", 0)),
    ("out tok", "", _metric("output_tokens", 0)),
    ("TTFT ms", "TTFT", _metric("ttft_ms", 1)),
    ("prefill tok/s", "prefill tok/s", _metric("prefill_tokens_per_s", 0)),
    ("TPOT ms", "TPOT", _metric("tpot_ms", 2)),
    ("decode tok/s", "decode tok/s", _metric("decode_tokens_per_s", 1)),
    ("ITL p50 ms", "ITL", _metric("itl_p50_ms", 2)),
    ("ITL p90 ms", "ITL", _metric("itl_p90_ms", 2)),
    ("e2e ms", "e2e", _metric("e2e_ms", 0)),
    ("peak MB", "peak memory", _metric("peak_memory_mb", 0)),
    ("prefill share", "prefill share", _prefill_share),
    ("phase", "phase", None),  # filled from the run's measured phases (per workload)
    ("e2e speed-up", "speed-up", _ratio("speedup_e2e")),
    ("MDE", "MDE", _mde),
    ("TTFT speed-up", "speed-up", _ratio("speedup_ttft")),
    ("decode speed-up", "speed-up", _ratio("speedup_decode")),
    ("accepted", "acceptance", _acceptance),
    ("match", "match", _match),
    ("KLD", "KLD", _kld),
    ("same top", "same top", _same_top),
    ("targets", "targets", None),  # filled from the experience targets' verdicts (per variant × workload)
]

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_TEXT_COLUMNS = {i for i, (header, _, _) in enumerate(COLUMNS) if header in ("variant", "workload", "phase")}


class SummaryTableModel(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []
        self._cells: list[list[tuple[str, Any]]] = []

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

        def special(header: str, s: Any) -> tuple[str, Any]:
            if header == "targets":
                v = by_group.get((s.variant, s.workload))
                return (v.short(), v.goodput) if v is not None else ("", None)
            return (phases.get(s.workload, ""), phases.get(s.workload, ""))

        self.beginResetModel()
        self._rows = list(summaries)
        self._cells = [
            [get(s) if get is not None else special(header, s) for header, _, get in COLUMNS]
            for s in self._rows
        ]
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
            return explain(COLUMNS[index.column()][1])
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        header, term, _ = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return header
        if role == Qt.ItemDataRole.ToolTipRole:
            return explain(term) or None
        return None


def make_table_view(model: SummaryTableModel, parent: QWidget | None = None) -> QTableView:
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
    return view
