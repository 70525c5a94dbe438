"""Prompts typed by hand in the experiment builder: one workload's prompts as text blocks."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.draft import unique_name
from workbench.gui.forms import spin

__all__ = ["PromptsDialog"]


class PromptsDialog(QDialog):
    """Type prompts by hand: one prompt per block, blocks separated by a line holding only ``---``."""

    SEPARATOR = "---"

    def __init__(
        self, parent: QWidget | None = None, *, taken: list[str], table: dict[str, Any] | None = None
    ):
        super().__init__(parent)
        self.setWindowTitle("Your prompts")
        self._taken = set(taken)
        self.name = QLineEdit(str((table or {}).get("name", unique_name("mine", self._taken))))
        self.as_chat = QCheckBox("Send as a chat message (the model's chat template is applied)")
        self.as_chat.setChecked(bool((table or {}).get("as_chat", True)))
        self.max_new_tokens = spin(1, 1_000_000, "Output budget per prompt")
        self.max_new_tokens.setValue(int((table or {}).get("max_new_tokens", 128)))
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText(f"First prompt…\n{self.SEPARATOR}\nSecond prompt…")
        prompts = (table or {}).get("prompts") or []
        self.text.setPlainText(
            f"\n{self.SEPARATOR}\n".join(
                p if isinstance(p, str) else str(p.get("prompt", "")) for p in prompts
            )
        )
        self.error = QLabel()
        self.error.setStyleSheet("color: #c62828;")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Workload name", self.name)
        form.addRow("Max new tokens", self.max_new_tokens)
        form.addRow("", self.as_chat)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(QLabel(f"Prompts (separate them with a line holding only {self.SEPARATOR}):"))
        layout.addWidget(self.text, 1)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.resize(640, 480)

    def prompts(self) -> list[str]:
        blocks: list[str] = []
        current: list[str] = []
        for line in self.text.toPlainText().splitlines():
            if line.strip() == self.SEPARATOR:
                blocks.append("\n".join(current).strip())
                current = []
            else:
                current.append(line)
        blocks.append("\n".join(current).strip())
        return [b for b in blocks if b]

    def table(self) -> dict[str, Any]:
        table: dict[str, Any] = {"name": self.name.text().strip(), "prompts": self.prompts()}
        table["max_new_tokens"] = self.max_new_tokens.value()
        if self.as_chat.isChecked():
            table["as_chat"] = True
        return table

    def _accept(self) -> None:
        name = self.name.text().strip()
        if not name:
            self.error.setText("Give the workload a name.")
        elif name in self._taken:
            self.error.setText(f"A workload named {name!r} exists already.")
        elif not self.prompts():
            self.error.setText("Write at least one prompt.")
        else:
            self.accept()
