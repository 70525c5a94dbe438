"""The experience targets of one workload, edited in the experiment builder: a limit per metric
(empty: no target) and the percentile they must hold at. Writes the spec's ``targets`` table; the
built-in defaults (``docs/targets.md``) show as placeholders and come back with "Use defaults"."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QDoubleValidator
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.formatting import significant
from workbench.spec.targets import DEFAULT_PERCENTILE, TARGET_METRICS, Targets

__all__ = ["TargetsDialog", "targets_text"]

#: what each target means to the person using the feature (the field's tooltip)
_HELP = {
    "ttft_ms": "Time to first token: how long the user waits before anything appears.",
    "tpot_ms": "Time per output token after the first: how fast the text streams.",
    "itl_p90_ms": "The 90th-percentile gap between token deliveries within a request: stutter.",
    "itl_p99_ms": "The 99th-percentile gap between token deliveries within a request: the worst stalls.",
    "e2e_ms": "The whole request, from sending it to the last token.",
    "decode_tokens_per_s": "Tokens per second after the first (a lower limit: at least this fast).",
    "kld_max": "Quality: the most the variant's predictions may differ from the baseline's (mean KLD per "
    "token, nats; q8_0 ~0.001, q4_K_M ~0.03 on LLaMA-3-8B). Judged on the quality pass, not per request.",
    "same_top_min": "Quality: the least share of tokens (0 to 1) whose top prediction is the baseline's. "
    "Judged on the quality pass, not per request.",
}


def targets_text(targets: Targets | None, builtin: bool = False) -> str:
    """One line for the picker: ``targets: TTFT ≤ 1,000 ms … at p90 (built-in)``."""
    if not targets:
        return "no targets"
    return f"targets: {targets.describe()}" + (" (built-in)" if builtin else "")


class TargetsDialog(QDialog):
    """``table()`` is the spec's ``targets`` table, or None for the workload's built-in defaults."""

    def __init__(
        self,
        workload: str,
        current: dict[str, Any] | None,
        defaults: Targets | None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Targets — {workload}")
        self._defaults = defaults
        self._use_defaults = False
        layout = QVBoxLayout(self)
        intro = QLabel(
            "What the feature needs: each limit must hold for this share of the requests. "
            "Leave a field empty for no target on that metric."
            + (f"<br>Built-in: {defaults.describe()}." if defaults else "")
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.edits: dict[str, QLineEdit] = {}
        for metric, measure in TARGET_METRICS.items():
            edit = QLineEdit()
            edit.setObjectName(f"target_{metric}")
            validator = QDoubleValidator(bottom=0.0)
            validator.setNotation(QDoubleValidator.Notation.StandardNotation)
            edit.setValidator(validator)
            edit.setToolTip(_HELP[metric])
            default = defaults.limit(metric) if defaults else None
            edit.setPlaceholderText(f"built-in {significant(default, 6)}" if default else "no target")
            unit = f" ({measure.unit})" if measure.unit else " (0–1)"
            form.addRow(f"{measure.label} {measure.bound}{unit}", edit)
            self.edits[metric] = edit
        self.percentile = QDoubleSpinBox()
        self.percentile.setObjectName("target_percentile")
        self.percentile.setRange(1, 99.9)
        self.percentile.setDecimals(1)
        self.percentile.setSuffix(" %")
        self.percentile.setToolTip("The share of the requests that must meet every limit (p90: 90 %)")
        form.addRow("of the requests (percentile)", self.percentile)
        layout.addLayout(form)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.defaults_btn = QPushButton("Use defaults")
        self.defaults_btn.setToolTip("Drop this workload's own targets: the built-in ones apply (if any)")
        buttons.addButton(self.defaults_btn, QDialogButtonBox.ButtonRole.ResetRole)
        self.defaults_btn.clicked.connect(self._defaults_clicked)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.set_table(current)

    def set_table(self, table: dict[str, Any] | None) -> None:
        source = table if table is not None else (self._defaults.to_table() if self._defaults else {})
        for metric, edit in self.edits.items():
            value = source.get(metric)
            edit.setText("" if value is None else significant(value, 6))
        percentile = source.get("percentile")
        if percentile is None and table is None and self._defaults is not None:
            percentile = self._defaults.percentile
        self.percentile.setValue(float(percentile or DEFAULT_PERCENTILE))

    def _defaults_clicked(self) -> None:
        self._use_defaults = True
        self.accept()

    def table(self) -> dict[str, Any] | None:
        """The ``targets`` table to write, or None: use the built-in defaults."""
        if self._use_defaults:
            return None
        out: dict[str, Any] = {}
        for metric, edit in self.edits.items():
            text = edit.text().strip().replace(",", "")
            if text:
                value = float(text)
                out[metric] = int(value) if value.is_integer() else value
        percentile = self.percentile.value()
        if out and percentile != DEFAULT_PERCENTILE:  # a percentile without a limit means nothing
            out["percentile"] = int(percentile) if float(percentile).is_integer() else percentile
        if self._defaults is not None and out == self._defaults.to_table():
            return None  # unchanged: the built-in defaults keep applying
        return out
