"""Form widgets generated from data: a model source picker, and a strategy's parameter form built from
its ``Config`` dataclass (types, defaults, help texts — the same source as ``workbench strategies -v``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QDoubleValidator, QIntValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from workbench.core.config import ConfigField
from workbench.sources import DEMO_MODELS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ModelSourceEdit", "ParamForm", "source_kind", "spin"]

#: (kind, label shown in the picker)
SOURCE_KINDS = (
    ("demo", "Demo model"),
    ("hub", "Hugging Face id"),
    ("dir", "Folder"),
    ("gguf", "GGUF file"),
)


def source_kind(ref: str) -> str:
    """Which picker a model string belongs to (by its shape; the spec parser checks it exists)."""
    ref = ref.strip()
    if not ref or ref.startswith("demo:"):
        return "demo"
    if ref.lower().endswith(".gguf"):
        return "gguf"
    if (
        ref.startswith(("/", "./", "../", "~", "\\"))
        or (len(ref) > 1 and ref[1] == ":")
        or Path(ref).is_dir()
    ):
        return "dir"
    return "hub"


class ModelSourceEdit(QWidget):
    """Demo model, Hugging Face id, folder or GGUF file; emits ``changed`` with the spec string."""

    changed = Signal(str)

    def __init__(
        self, parent: QWidget | None = None, *, optional: bool = False, base_dir: Path | None = None
    ):
        super().__init__(parent)
        self._optional = optional
        self.base_dir = base_dir or Path.cwd()
        self.kind = QComboBox()
        if optional:
            self.kind.addItem("None", "none")
        for kind, label in SOURCE_KINDS:
            self.kind.addItem(label, kind)
        self.kind.setToolTip("Where the model comes from")
        self.demo = QComboBox()
        for name in DEMO_MODELS:
            self.demo.addItem(f"demo:{name}")
        self.demo.setToolTip("The built-in demo model (SmolLM2-135M-Instruct, fetched from PyPI once)")
        self.text = QLineEdit()
        self.browse = QPushButton("Browse…")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.kind)
        layout.addWidget(self.demo, 1)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.browse)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.demo.currentIndexChanged.connect(self._emit)
        self.text.editingFinished.connect(self._emit)
        self.browse.clicked.connect(self._browse)
        self._setting = False
        self._kind_changed()

    def value(self) -> str:
        kind = self.kind.currentData()
        if kind == "none":
            return ""
        if kind == "demo":
            return self.demo.currentText()
        return self.text.text().strip()

    def set_value(self, ref: str) -> None:
        self._setting = True
        try:
            kind = "none" if (self._optional and not ref) else source_kind(ref)
            self.kind.setCurrentIndex(self.kind.findData(kind))
            if kind == "demo" and ref:
                index = self.demo.findText(ref)
                if index < 0:  # an unknown demo name: show it, the spec check will say what is wrong
                    self.demo.addItem(ref)
                    index = self.demo.count() - 1
                self.demo.setCurrentIndex(index)
            elif kind != "none":
                self.text.setText(ref)
            self._update_widgets()
        finally:
            self._setting = False

    def _kind_changed(self) -> None:
        self._update_widgets()
        if not self._setting:
            self.text.clear()
            self._emit()

    def _update_widgets(self) -> None:
        kind = self.kind.currentData()
        self.demo.setVisible(kind == "demo")
        self.text.setVisible(kind in ("hub", "dir", "gguf"))
        self.browse.setVisible(kind in ("dir", "gguf"))
        self.text.setPlaceholderText(
            {
                "hub": "org/name, e.g. Qwen/Qwen2.5-0.5B-Instruct (uses the Hugging Face cache)",
                "dir": "a folder with config.json and safetensors",
                "gguf": "path/to/model.gguf",
            }.get(kind, "")
        )

    def _browse(self) -> None:
        start = self.text.text() or str(self.base_dir)
        if self.kind.currentData() == "dir":
            chosen = QFileDialog.getExistingDirectory(self, "Model folder", start)
        else:
            chosen, _ = QFileDialog.getOpenFileName(self, "GGUF model file", start, "GGUF models (*.gguf)")
        if chosen:
            self.text.setText(chosen)
            self._emit()

    def _emit(self, *_: Any) -> None:
        if not self._setting:
            self.changed.emit(self.value())


class ParamForm(QWidget):
    """One row per strategy parameter. ``values()`` holds only what differs from the defaults, so a
    saved spec stays as short as a hand-written one; unknown values are shown as TOML text."""

    changed = Signal()

    def __init__(
        self, fields: list[ConfigField], parent: QWidget | None = None, *, base_dir: Path | None = None
    ):
        super().__init__(parent)
        self.fields = fields
        self._editors: dict[str, QWidget] = {}
        self._setting = False
        layout = QFormLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        if not fields:
            layout.addRow(QLabel("This strategy has no parameters."))
        for f in fields:
            editor = self._make_editor(f, base_dir)
            tip = f"{f.help}\n\n{f.name}: {f.type}, default {f.default!r}".strip()
            editor.setToolTip(tip)
            label = QLabel(f.name.replace("_", " "))
            label.setToolTip(tip)
            layout.addRow(label, editor)
            self._editors[f.name] = editor
        self.set_values({})

    def _make_editor(self, f: ConfigField, base_dir: Path | None) -> QWidget:
        w: QWidget
        if f.model_source:
            source = ModelSourceEdit(optional=True, base_dir=base_dir)
            source.changed.connect(self._emit)
            w = source
        elif f.choices:
            combo = QComboBox()
            for choice in f.choices:
                combo.addItem(str(choice), choice)
            combo.currentIndexChanged.connect(self._emit)
            w = combo
        elif f.type == "bool":
            check = QCheckBox()
            check.toggled.connect(self._emit)
            w = check
        elif f.type == "int":
            box = QSpinBox()
            box.setRange(-(2**31) + 1, 2**31 - 1)
            box.valueChanged.connect(self._emit)
            w = box
        else:  # float, strings, optional values, lists: a line of text
            line = QLineEdit()
            if f.type in ("float", "float | None"):
                line.setValidator(QDoubleValidator())
            elif f.type == "int | None":
                line.setValidator(QIntValidator())
            if f.type.endswith("| None"):
                line.setPlaceholderText("not set")
            line.editingFinished.connect(self._emit)
            w = line
        w.setObjectName(f"param_{f.name}")
        return w

    def editor(self, name: str) -> QWidget:
        return self._editors[name]

    def set_values(self, params: dict[str, Any]) -> None:
        self._setting = True
        try:
            for f in self.fields:
                self._set(self._editors[f.name], f, params.get(f.name, f.default))
        finally:
            self._setting = False

    def _set(self, w: QWidget, f: ConfigField, value: Any) -> None:
        if isinstance(w, ModelSourceEdit):
            w.set_value(str(value or ""))
        elif isinstance(w, QComboBox):
            index = w.findData(value)
            if index < 0:
                w.addItem(str(value), value)  # not a valid choice: the spec check says so
                index = w.count() - 1
            w.setCurrentIndex(index)
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QSpinBox):
            if isinstance(value, int):
                w.setValue(value)
        elif isinstance(w, QLineEdit):
            w.setText(_as_text(value, f))

    def values(self) -> dict[str, Any]:
        """Parameters that differ from their defaults."""
        out = {}
        for f in self.fields:
            value = self._get(self._editors[f.name], f)
            if value != f.default:
                out[f.name] = value
        return out

    def _get(self, w: QWidget, f: ConfigField) -> Any:
        if isinstance(w, ModelSourceEdit):
            return w.value()
        if isinstance(w, QComboBox):
            return w.currentData()
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QSpinBox):
            return w.value()
        assert isinstance(w, QLineEdit)
        return _from_text(w.text(), f)

    def _emit(self, *_: Any) -> None:
        if not self._setting:
            self.changed.emit()


def _as_text(value: Any, f: ConfigField) -> str:
    if value is None:
        return ""
    if f.type in ("str", "str | None") and isinstance(value, str):
        return value
    from workbench.spec.writer import toml_value

    try:
        return toml_value(value)
    except ValueError:
        return str(value)


def _from_text(text: str, f: ConfigField) -> Any:
    """A line of text as the parameter's value: empty = not set; numbers and lists as TOML."""
    text = text.strip()
    if not text:
        return None if f.type.endswith("| None") else f.default
    if f.type in ("str", "str | None"):
        return text
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # left as typed: the spec check names the key and what it must be


def spin(lo: int, hi: int, tip: str, *, special: str | None = None) -> QSpinBox:
    """A spin box for a count: its range, a tooltip, and a word shown for the minimum (``special``)."""
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setToolTip(tip)
    if special:
        box.setSpecialValueText(special)
    box.setMinimumWidth(90)
    return box
