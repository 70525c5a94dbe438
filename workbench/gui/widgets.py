"""The main window's own small widgets: the banner above the tabs and the first-start page; and the
escaping of text put into their rich-text labels."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

__all__ = ["Banner", "WelcomePage", "escape"]


class Banner(QFrame):
    """A strip above the tabs for what must not be missed (a worker crash), with a close button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Hide")
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, html: str) -> None:
        dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128
        bg, fg, edge = ("#4a1f1c", "#fde0dc", "#e57373") if dark else ("#fdecea", "#611a15", "#e57373")
        self.setStyleSheet(
            f"#banner {{ background: {bg}; border: 1px solid {edge}; border-radius: 4px; }}"
            f"#banner QLabel {{ color: {fg}; }}"
        )
        self.label.setText(html)
        self.show()


class WelcomePage(QWidget):
    """First start (no runs yet): what the app is for, and the demo one click away."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        title = QLabel("Where does the time go — prefill or decode?")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        title.setFont(font)
        text = QLabel(
            "Workbench runs the same prompts through variants of a model — baseline, quantized, "
            "speculative decoding, prompt lookup… — on this machine, and shows for each one how long "
            "it reads the prompt (<b>prefill</b>, the time to the first token) and how fast it writes "
            "(<b>decode</b>, tokens per second). The demo compares four variants of a small model on "
            "chat, summarising and code prompts in a few minutes on a laptop CPU."
        )
        text.setWordWrap(True)
        text.setMaximumWidth(720)
        self.demo_btn = QPushButton("Run the demo comparison")
        self.demo_btn.setObjectName("demoButton")
        self.demo_btn.setDefault(True)
        self.demo_btn.setMinimumHeight(36)
        self.build_btn = QPushButton("Build an experiment")
        self.open_btn = QPushButton("Open a results database…")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setMaximumWidth(720)
        self.note.hide()
        buttons = QHBoxLayout()
        for b in (self.demo_btn, self.build_btn, self.open_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)
        inner = QVBoxLayout()
        inner.addWidget(title)
        inner.addSpacing(8)
        inner.addWidget(text)
        inner.addSpacing(16)
        inner.addLayout(buttons)
        inner.addWidget(self.note)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addLayout(inner)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)

    def set_viewer_reason(self, reason: str | None) -> None:
        self.demo_btn.setEnabled(reason is None)
        self.note.setText(reason or "")
        self.note.setVisible(bool(reason))


def escape(text: str) -> str:
    """``text`` for a rich-text label (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
