"""What if: the run on screen projected to an input and output length it did not run — TTFT, the time
after the first token and e2e per variant from its fitted lines, with their 95 % confidence intervals
(the same :func:`workbench.analysis.projection.project` as ``workbench project``). A prediction, and
the dialog says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.core.metrics import METRIC_TABLE
from workbench.gui.forms import spin
from workbench.gui.widgets import escape
from workbench.store import TrialRecord

__all__ = ["ProjectionDialog"]


class ProjectionDialog(QDialog):
    """Input and output length in, the projection table out (updated as the lengths change)."""

    def __init__(self, trials: Sequence[TrialRecord], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("What if — projected from the fitted lines")
        self.trials = list(trials)
        self.variants = list(
            dict.fromkeys(t.variant for t in self.trials if t.status == "ok" and not t.warmup)
        )
        self.projections: list[Any] = []
        from workbench.analysis.projection import default_lengths

        # the longest lengths inside every variant's measured range: no row starts extrapolated
        n_in, n_out = default_lengths(self.trials) or (512, 128)
        self.input_tokens = spin(1, 1_000_000, "Input length (tokens)")
        self.input_tokens.setObjectName("projectInput")
        self.input_tokens.setValue(n_in)
        self.output_tokens = spin(1, 1_000_000, "Output length (tokens)")
        self.output_tokens.setObjectName("projectOutput")
        self.output_tokens.setValue(n_out)
        form = QFormLayout()
        lengths = QHBoxLayout()
        lengths.addWidget(QLabel("input"))
        lengths.addWidget(self.input_tokens)
        lengths.addWidget(QLabel("output"))
        lengths.addWidget(self.output_tokens)
        lengths.addStretch(1)
        form.addRow("Tokens", lengths)
        self.table = QTableWidget(0, 6)
        self.table.setObjectName("projectionTable")
        self.table.setHorizontalHeaderLabels(
            [
                "variant",
                *(METRIC_TABLE[key].header for key in ("ttft_ms", "decode_phase_ms", "e2e_ms")),
                "prefill ms/tok",
                "decode ms/tok",
            ]
        )
        self.table.verticalHeader().setVisible(False)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        intro = QLabel(
            "<b>A prediction, not a measurement</b>: straight lines fitted to each variant's trials "
            "(TTFT against input tokens, the time after the first token against output tokens); "
            "[lo–hi] is their 95 % confidence interval (on a log scale: never below 0). It opens at the "
            "longest lengths inside every variant's measured range; runs with the sweep-input and "
            "sweep-output workloads give the lines their range."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.notes)
        layout.addWidget(buttons)
        self.input_tokens.valueChanged.connect(self.update_projection)
        self.output_tokens.valueChanged.connect(self.update_projection)
        self.resize(820, 360)
        self.update_projection()

    def update_projection(self, *_: Any) -> None:
        from workbench.analysis.projection import project
        from workbench.report.targets import projection_notes, projection_table

        n_in, n_out = self.input_tokens.value(), self.output_tokens.value()
        self.projections = [project(self.trials, v, n_in, n_out) for v in self.variants]
        rows = projection_table(self.projections)[1]
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [row[0], *row[3:]]  # the lengths are the inputs above
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(str(text)))
        self.table.resizeColumnsToContents()
        # one warning per cause, naming the variants it concerns (not one per row)
        self.notes.setText("<br>".join(escape(n) for n in projection_notes(self.projections)))
