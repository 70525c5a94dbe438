"""A run (or two runs side by side) as the GUI shows it: loaded off the UI thread, then a sortable
table of metrics per variant × workload with speed-ups, acceptance, match and prefill share.

:func:`load_results` is plain Python over its own database connection, so it runs in a thread pool
while a run is being written; the UI thread only fills the table with what it returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from .glossary import explain

__all__ = ["COLUMNS", "ResultsData", "SummaryTableModel", "load_results", "make_table_view"]


@dataclass
class ResultsData:
    """What one view of the results shows; the variant names carry ``RUN:`` when two runs are compared."""

    run_ids: tuple[int, ...]
    runs: list[dict[str, Any]]
    variants: list[dict[str, Any]]
    trials: list[dict[str, Any]]  # warm-ups included (flagged); every status
    summaries: list[Any]  # analysis.GroupSummary
    baseline: str | None
    failures: list[str] = field(default_factory=list)  # variants that crashed or failed to load

    @property
    def title(self) -> str:
        if len(self.runs) == 1:
            r = self.runs[0]
            return f"Run {r['id']} — {r['name']} ({r['status']})"
        return "Compare " + " vs ".join(f"run {r['id']} ({r['name']})" for r in self.runs)

    @property
    def running(self) -> bool:
        return any(r["status"] == "running" for r in self.runs)


def load_results(db_path: Path, run_ids: Sequence[int], *, baseline: str | None = None) -> ResultsData:
    """Read the runs and summarise them (medians, bootstrap CIs, speed-ups). Safe in any thread."""
    from ..analysis import summarize
    from ..store import Store

    store = Store(db_path, create=False)
    try:
        runs = [store.resolve_run(run_id) for run_id in run_ids]
        prefix = len(runs) > 1
        variants: list[dict[str, Any]] = []
        trials: list[dict[str, Any]] = []
        failures: list[str] = []
        for run in runs:
            tag = f"{run['id']}:" if prefix else ""
            for v in store.variants(run["id"]):
                variants.append({**v, "name": tag + v["name"]})
                if v["status"] == "failed" and v.get("error"):
                    failures.append(f"{tag}{v['name']}: {v['error']}")
            for t in store.trials(run["id"], include_warmup=True):
                trials.append({**t, "variant": tag + t["variant"]} if prefix else t)
        if baseline is None and runs:
            baseline = runs[0]["baseline"]
            if prefix and baseline:
                baseline = f"{runs[0]['id']}:{baseline}"
        names = {t["variant"] for t in trials}
        summaries = summarize(trials, baseline if baseline in names else None)
        return ResultsData(tuple(run_ids), runs, variants, trials, summaries, baseline, failures)
    finally:
        store.close()


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


def _n(s: Any) -> tuple[str, float | None]:
    return (f"{s.n_ok}" + (f" ({s.n_failed} failed)" if s.n_failed else ""), float(s.n_ok))


#: (header, glossary term for the tooltip, getter -> (text, sort value))
COLUMNS: list[tuple[str, str, Callable[[Any], tuple[str, Any]]]] = [
    ("variant", "", lambda s: (s.variant, s.variant)),
    ("workload", "", lambda s: (s.workload, s.workload)),
    ("n", "", _n),
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
    ("e2e speed-up", "speed-up", _ratio("speedup_e2e")),
    ("TTFT speed-up", "speed-up", _ratio("speedup_ttft")),
    ("decode speed-up", "speed-up", _ratio("speedup_decode")),
    ("accepted", "acceptance", _acceptance),
    ("match", "match", _match),
]

SORT_ROLE = Qt.ItemDataRole.UserRole + 1


class SummaryTableModel(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []
        self._cells: list[list[tuple[str, Any]]] = []

    def set_summaries(self, summaries: Sequence[Any]) -> None:
        self.beginResetModel()
        self._rows = list(summaries)
        self._cells = [[get(s) for _, _, get in COLUMNS] for s in self._rows]
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
            return value if value is not None else float("-inf") if index.column() > 1 else ""
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() > 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and index.column() >= 14 and text:
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


def environment_line(run: dict[str, Any]) -> str:
    """One line on the machine a run was measured on."""
    env = json.loads(run.get("environment") or "{}").get("host", {})
    if not env:
        return ""
    packages = env.get("packages", {})
    gpu = f"GPU {env['gpu']}" if env.get("gpu") else "no GPU"
    return (
        f"{env.get('cpu')} ×{env.get('cpu_count')}, {env.get('memory_gb')} GB, {gpu}; "
        f"torch {packages.get('torch')}, transformers {packages.get('transformers')}"
    )
