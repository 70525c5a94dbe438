"""The builder's variants: the list (add, duplicate, remove), the selected variant's editor (name,
model source, strategy, dtype, device, Python) and its strategy's parameter form, generated from the
strategy's ``Config``. A name the builder gave follows what the variant is (its strategy, its
precision) until one is typed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QListWidgetItem

from workbench.core.errors import WorkbenchError
from workbench.gui.builder_form import BuilderForm
from workbench.gui.draft import is_suggested_name, suggested_name, unique_name
from workbench.gui.forms import ParamForm

if TYPE_CHECKING:
    from workbench.core.config import ConfigField

__all__ = ["COMMON_KEYS", "VariantsEditing"]

#: the keys every variant has; the others are its strategy's parameters
COMMON_KEYS = ("name", "model", "strategy", "dtype", "device", "trust_remote_code", "python")


class VariantsEditing(BuilderForm):
    """The variants part of :class:`~workbench.gui.builder.ExperimentBuilder`."""

    def _load_strategies(self) -> None:
        from workbench.core.registry import list_strategies

        for info in list_strategies():
            self._strategies[info.name] = info

    def add_variant(self) -> None:
        self.draft.add_variant()
        self._refresh_variant_list(select=len(self.draft.variants) - 1)
        self._changed()

    def duplicate_variant(self) -> None:
        row = self.variant_list.currentRow()
        if row < 0:
            return
        self.draft.duplicate_variant(row)
        self._refresh_variant_list(select=len(self.draft.variants) - 1)
        self._changed()

    def remove_variant(self) -> None:
        row = self.variant_list.currentRow()
        if row < 0:
            return
        del self.draft.variants[row]
        self._refresh_variant_list(select=min(row, len(self.draft.variants) - 1))
        self._changed()

    def _refresh_variant_list(self, select: int) -> None:
        self.variant_list.blockSignals(True)
        self.variant_list.clear()
        for v in self.draft.variants:
            item = QListWidgetItem(_variant_label(v))
            item.setToolTip(_variant_tip(v))
            self.variant_list.addItem(item)
        self.variant_list.setCurrentRow(select if self.draft.variants else -1)
        self.variant_list.blockSignals(False)
        self._show_variant(self.variant_list.currentRow())

    def _show_variant(self, row: int) -> None:
        has = 0 <= row < len(self.draft.variants)
        self.variant_editor.setEnabled(has)
        self.dup_variant_btn.setEnabled(has)
        self.remove_variant_btn.setEnabled(has)
        if not has:
            return
        v = self.draft.variants[row]
        was_loading, self._loading = self._loading, True
        try:
            self.v_name.setText(str(v.get("name", "")))
            self.v_model.set_value(str(v.get("model", "")))
            strategy = str(v.get("strategy", "baseline"))
            self._fill_strategy_combo(strategy)
            self.v_dtype.setCurrentText(str(v.get("dtype", "auto")))
            self.v_device.setCurrentText(str(v.get("device", "auto")))
            self.v_trust.setChecked(bool(v.get("trust_remote_code", False)))
            self.v_python.setText(str(v.get("python", "")))
            self._rebuild_params(strategy, {k: val for k, val in v.items() if k not in COMMON_KEYS})
        finally:
            self._loading = was_loading

    def _fill_strategy_combo(self, current: str) -> None:
        combo = self.v_strategy
        combo.blockSignals(True)
        combo.clear()
        names = sorted(self._strategies, key=lambda n: (n == "fake", n != "baseline", n))
        if current not in names:
            names.append(current)  # an import path or a misspelt name: kept, the check names it
        model = combo.model()
        for i, name in enumerate(names):
            info = self._strategies.get(name)
            combo.addItem(name)
            if info is not None and not info.available:
                item = model.item(i)  # type: ignore[attr-defined]
                item.setEnabled(False)
                combo.setItemData(i, f"Not available here: {info.unavailable}", Qt.ItemDataRole.ToolTipRole)
            elif info is not None:
                combo.setItemData(i, info.description, Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(names.index(current))
        combo.blockSignals(False)
        self._describe_strategy(current)

    def _describe_strategy(self, name: str) -> None:
        info = self._strategies.get(name)
        if info is None:
            text = "Not a registered strategy name (an import path is checked when the spec is validated)."
        elif not info.available:
            text = f"<span style='color:#c62828'>Not available here: {info.unavailable}</span>"
        else:
            text = info.description
        self.v_strategy_help.setText(text)
        requires_model = getattr(info.cls, "requires_model", True) if info else True
        self.v_model.setEnabled(requires_model)

    def _strategy_fields(self, name: str) -> list[ConfigField]:
        if name not in self._fields_cache:
            from workbench.core.config import config_fields
            from workbench.core.registry import get

            try:
                self._fields_cache[name] = config_fields(get(name).Config)
            except WorkbenchError:
                self._fields_cache[name] = []
        return self._fields_cache[name]

    def _rebuild_params(self, strategy: str, params: dict[str, Any]) -> None:
        if self._param_form is not None:
            self.params_layout.removeWidget(self._param_form)
            self._param_form.hide()
            self._param_form.deleteLater()
        self._param_form = ParamForm(self._strategy_fields(strategy), base_dir=self.draft.base_dir)
        self._param_form.setObjectName("paramForm")
        self._param_form.set_values(params)
        self._param_form.changed.connect(self._editor_changed)
        self._param_strategy = strategy
        self.params_layout.insertWidget(0, self._param_form)

    def _strategy_changed(self) -> None:
        if self._loading:
            return
        row = self.variant_list.currentRow()
        if row < 0:
            return
        v = self.draft.variants[row]
        new = self.v_strategy.currentText()
        old_fields = {f.name for f in self._strategy_fields(self._param_strategy or "")}
        # keep parameters the new strategy shares (and unknown keys, which the check reports)
        new_fields = {f.name for f in self._strategy_fields(new)}
        params = {
            k: val
            for k, val in v.items()
            if k not in COMMON_KEYS and (k in new_fields or k not in old_fields)
        }
        self.draft.variants[row] = {**{k: val for k, val in v.items() if k in COMMON_KEYS}, **params}
        self._describe_strategy(new)
        self._rebuild_params(new, params)
        self._editor_changed()

    def _editor_changed(self, *_: object) -> None:
        if self._loading:
            return
        row = self.variant_list.currentRow()
        if row < 0 or self._param_form is None:
            return
        old = self.draft.variants[row]
        strategy = self.v_strategy.currentText()
        info = self._strategies.get(strategy)
        name = self.v_name.text().strip() or str(old.get("name", ""))
        new: dict[str, Any] = {"name": name}
        if info is None or getattr(info.cls, "requires_model", True):
            new["model"] = self.v_model.value()
        new["strategy"] = strategy
        if self.v_dtype.currentText() != "auto":
            new["dtype"] = self.v_dtype.currentText()
        if self.v_device.currentText().strip() not in ("", "auto"):
            new["device"] = self.v_device.currentText().strip()
        if self.v_trust.isChecked():
            new["trust_remote_code"] = True
        if self.v_python.text().strip():
            new["python"] = self.v_python.text().strip()
        field_names = {f.name for f in self._param_form.fields}
        # unknown keys stay (the check names them); the form's parameters replace their old values
        new.update({k: val for k, val in old.items() if k not in COMMON_KEYS and k not in field_names})
        new.update(self._param_form.values())
        # a name the builder gave follows what the variant is (its strategy, its precision)
        if name != "baseline" and is_suggested_name(name, old) and not is_suggested_name(name, new):
            others = [n for i, n in enumerate(self.draft.variant_names()) if i != row]
            new["name"] = unique_name(suggested_name(new), others)
            self.v_name.setText(new["name"])
        self.draft.variants[row] = new
        self.variant_list.item(row).setText(_variant_label(new))
        self.variant_list.item(row).setToolTip(_variant_tip(new))
        self._changed()

    def _browse_python(self) -> None:
        start = self.v_python.text().strip() or str(self.draft.base_dir)
        chosen, _ = QFileDialog.getOpenFileName(self, "The variant's Python interpreter", start)
        if chosen:
            self.v_python.setText(chosen)
            self._editor_changed()


def _variant_label(v: dict[str, Any]) -> str:
    """``name (strategy)`` (just the name when it is the strategy's); the model is the tooltip."""
    name, strategy = str(v.get("name", "?")), str(v.get("strategy", "baseline"))
    return name if name == strategy else f"{name}  ({strategy})"


def _variant_tip(v: dict[str, Any]) -> str:
    parts = [f"strategy {v.get('strategy', 'baseline')}"]
    if v.get("model"):
        parts.append(f"model {v['model']}")
    if v.get("python"):
        parts.append(f"python {v['python']}")
    return f"{v.get('name', '?')}: " + ", ".join(parts)
