"""The results table: metrics per variant × workload with speed-ups, acceptance, match, prefill share
and phase, sortable, with one-sentence tooltips. Its data comes from :mod:`workbench.gui.loading`.

By default it shows the columns a person reads first (:data:`DEFAULT_COLUMNS`, the CLI main table's);
the rest are behind the header's context menu (a check box per column, "Show all"), and the choice is
kept in the settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView, QWidget

from workbench.gui.glossary import explain

__all__ = [
    "COLUMNS",
    "DEFAULT_COLUMNS",
    "ColumnChooser",
    "SummaryTableModel",
    "make_table_view",
    "targets_text",
]


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
    ("phase", "phase", None),  # the row's own, from its prefill share (the workload's: the tooltip)
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

#: shown until a person chooses (≤ 10, ~1400 px): the columns of the CLI's main table without --wide
DEFAULT_COLUMNS = (
    "variant",
    "workload",
    "TTFT ms",
    "decode tok/s",
    "e2e ms",
    "e2e speed-up",
    "TTFT speed-up",
    "decode speed-up",
    "match",
    "KLD",
)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_TEXT_COLUMNS = {i for i, (header, _, _) in enumerate(COLUMNS) if header in ("variant", "workload", "phase")}


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

        def special(header: str, s: Any) -> tuple[str, Any]:
            if header == "targets":
                v = by_group.get((s.variant, s.workload))
                return (targets_text(v), v.goodput) if v is not None else ("", None)
            return _phase(s)

        self._phases = phases
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
            tip = explain(COLUMNS[index.column()][1])
            workload = self._rows[index.row()].workload
            if COLUMNS[index.column()][0] == "phase" and self._phases.get(workload):
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


def _phase(s: Any) -> tuple[str, Any]:
    """The row's own phase, from its own prefill share (the same thresholds as the workload's)."""
    from workbench.analysis.phases import classify

    share = _prefill_share(s)[1]
    label = classify(share) if share is not None else ""
    return (label, label)


def targets_text(v: Any) -> str:
    """A :class:`~workbench.analysis.targets.Verdict` in the table: ``met 2/2 targets · goodput 90 %
    (9/10 requests)``, saying what each count counts."""
    met, n = sum(c.status == "met" for c in v.checks), len(v.checks)
    if v.status == "met":
        head = f"met {met}/{n} targets"
    elif v.status == "missed":
        from workbench.spec.targets import TARGET_METRICS

        head = "missed " + ", ".join(TARGET_METRICS[c.metric][0] for c in v.missed)
    else:
        head = f"met {met}/{n} targets, no data for the rest"
    if v.goodput is None:
        return head
    return f"{head} · goodput {v.goodput:.0%} ({v.good}/{v.requests} requests)"


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
