"""The main window's own small widgets: the banner above the tabs and the first-start page; and the
escaping of text put into their rich-text labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["LOG_PLACEHOLDER", "Banner", "WelcomePage", "escape", "glossary_dialog", "window_title"]

#: what the Log tab says while it is empty
LOG_PLACEHOLDER = (
    "The log of this session: what the workers report during a run (loading each variant, every trial "
    "with its TTFT and e2e, their warnings and errors) and what the app did (databases and specs opened, "
    "files saved and exported).\n\n"
    "Nothing yet. Start a run — Run in the Experiment tab (Ctrl+R), or Run → Run the demo comparison — "
    "and it fills as the trials land. A past run's trials are in its database (History, Results); its "
    "workers' messages are not kept."
)


def window_title(db_path: Path, runs: Any = ()) -> str:
    """``Run 3 — demo: the levers… — results.db — Workbench``: the run(s) on screen and the database."""
    parts = []
    runs = list(runs or ())
    if len(runs) == 1:
        name = str(runs[0].get("name") or "")
        name = name if len(name) <= 40 else name[:39].rstrip() + "…"
        parts.append(f"Run {runs[0]['id']}" + (f" — {name}" if name else ""))
    elif len(runs) == 2:
        parts.append(f"Run {runs[1]['id']} against run {runs[0]['id']}")
    parts += [db_path.name, "Workbench"]
    return " — ".join(parts)


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
            "(<b>decode</b>, tokens per second). The demo compares five variants of a small model on "
            "chat, summarising and code prompts in a few minutes on a laptop CPU."
        )
        text.setWordWrap(True)
        text.setMaximumWidth(720)
        self.demo_btn = QPushButton("Run the demo comparison")
        self.demo_btn.setObjectName("demoButton")
        self.demo_btn.setDefault(True)
        self.demo_btn.setMinimumHeight(36)
        self.demo_btn.setToolTip("Five variants of a small model on chat, summarise and code: about 3 min")
        self.sample_btn = QPushButton("Open the sample run")
        self.sample_btn.setObjectName("sampleButton")
        self.sample_btn.setMinimumHeight(36)
        self.sample_btn.setToolTip(
            "A finished run of the demo that ships with Workbench: every chart and table at once, "
            "nothing to wait for (opened as a copy in your data folder)"
        )
        self.build_btn = QPushButton("Build an experiment")
        self.open_btn = QPushButton("Open a results database…")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setMaximumWidth(720)
        self.note.hide()
        buttons = QHBoxLayout()  # see results: run the demo, or open the finished one that ships
        for b in (self.demo_btn, self.sample_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)
        more = QHBoxLayout()  # your own: build an experiment, open a database
        for b in (self.build_btn, self.open_btn):
            more.addWidget(b)
        more.addStretch(1)
        inner = QVBoxLayout()
        inner.addWidget(title)
        inner.addSpacing(8)
        inner.addWidget(text)
        inner.addSpacing(16)
        inner.addLayout(buttons)
        inner.addWidget(self.note)
        inner.addSpacing(8)
        inner.addLayout(more)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addLayout(inner)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)

    def set_viewer_reason(self, reason: str | None) -> None:
        """Viewer mode: the demo cannot run here; the note under the buttons says why (and the
        sample run is the way to see results)."""
        self.demo_btn.setEnabled(reason is None)
        self.demo_btn.setToolTip(
            reason or "Five variants of a small model on chat, summarise and code: about 3 min"
        )
        text = (
            f"<b>Run the demo</b> is off: {escape(reason)} <b>Open the sample run</b> shows one."
            if reason
            else ""
        )
        self.note.setText(text)
        self.note.setVisible(bool(reason))


def glossary_dialog(parent: QWidget | None, terms: dict[str, str]) -> QDialog:
    """Help → Glossary: one sentence per term, in a scrolling text (the whole list is taller than
    most screens), shown modeless and deleted when closed."""
    dialog = QDialog(parent)
    dialog.setObjectName("glossary")
    dialog.setWindowTitle("Glossary")
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    text = QTextBrowser()
    text.setObjectName("glossaryText")
    text.setHtml("".join(f"<p><b>{escape(term)}</b> — {escape(s)}</p>" for term, s in terms.items()))
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    layout = QVBoxLayout(dialog)
    layout.addWidget(text, 1)
    layout.addWidget(buttons)
    dialog.resize(640, 560)
    dialog.show()
    return dialog


def escape(text: str) -> str:
    """``text`` for a rich-text label (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
