"""The builder's workloads: the built-in ones (ticked or not, each with its description, predicted
phase and experience targets), your own (a JSONL file, or prompts written here), and their targets
(:class:`~workbench.gui.targets_dialog.TargetsDialog`).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QCheckBox, QDialog, QFileDialog, QLabel, QListWidgetItem, QPushButton

from workbench.formatting import percent
from workbench.gui.builder_form import BuilderForm
from workbench.gui.draft import unique_name
from workbench.gui.prompts import PromptsDialog
from workbench.spec.parse import Spec

__all__ = ["DESCRIPTION_CHARS", "WorkloadsEditing"]

#: a workload's description in the picker is cut to this many characters (the whole one is its tooltip)
DESCRIPTION_CHARS = 46


class WorkloadsEditing(BuilderForm):
    """The workloads part of :class:`~workbench.gui.builder.ExperimentBuilder`."""

    def _load_builtin_workloads(self) -> None:
        """The built-in workloads' grid: a checkbox, the description cut short, a Targets… button."""
        from workbench.spec.workloads import builtin_names, builtin_workload

        for i, name in enumerate(builtin_names()):
            description = builtin_workload(name).description
            box = QCheckBox(name)
            box.setObjectName(f"workload_{name}")
            box.setToolTip(description)
            box.toggled.connect(lambda on, n=name: self._builtin_toggled(n, on))
            label = QLabel(html.escape(_short(description)))
            label.setWordWrap(False)  # one line per fact: the description cut short, its phase, its targets
            label.setToolTip(description)
            label.setTextFormat(Qt.TextFormat.RichText)
            self.builtin_boxes[name] = box
            self.builtin_labels[name] = (label, description)
            targets = QPushButton("Targets…")
            targets.setObjectName(f"targets_{name}")
            targets.setToolTip(f"What {name} needs: TTFT, TPOT, ITL, e2e or decode tok/s at a percentile")
            targets.clicked.connect(lambda _=False, n=name: self.edit_targets(n))
            self.target_buttons[name] = targets
            row, col = i // 2, (i % 2) * 3
            self.builtin_grid.addWidget(box, row, col)
            self.builtin_grid.addWidget(label, row, col + 1)
            self.builtin_grid.addWidget(targets, row, col + 2)
        self.builtin_grid.setColumnStretch(1, 1)
        self.builtin_grid.setColumnStretch(4, 1)

    def _show_predictions(self, spec: Spec) -> None:
        """Before any run: is each workload prefill- or decode-heavy? (from its typical input and output
        lengths; the run's measurement wins, and a disagreement is pointed out in the results)."""
        from workbench.analysis.phases import predict_workload
        from workbench.report.phases import prediction_text

        self.predictions = {w.name: predict_workload(w) for w in spec.workloads}
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        for name, (label, description) in self.builtin_labels.items():
            p = self.predictions.get(name) if self.builtin_boxes[name].isChecked() else None
            text = f"<span style='color:{muted}'>{html.escape(_short(description))}</span>"
            if p is not None:
                text += f"<br>predicted <b>{p.label}</b>, prefill ~{percent(p.prefill_share)}"
            text += f"<br>{html.escape(self._targets_line(name, spec))}"
            label.setText(text)
            label.setToolTip(description + (f"\n\n{prediction_text(p)}" if p else ""))
        for i in range(self.custom_list.count()):
            item = self.custom_list.item(i)
            table = item.data(Qt.ItemDataRole.UserRole)
            p = self.predictions.get(table.get("name"))
            base = item.text().split(" → predicted")[0]
            item.setText(base + (f" → predicted {p.label}, prefill ~{percent(p.prefill_share)}" if p else ""))
            workload = next((w for w in spec.workloads if w.name == table.get("name")), None)
            targets = workload.targets.describe() if workload is not None and workload.targets else "none"
            item.setToolTip((prediction_text(p) + "\n" if p else "") + f"targets: {targets}")

    def _workload_table(self, name: str) -> dict[str, Any] | None:
        return next((w for w in self.draft.workloads if w.get("name") == name), None)

    def _targets_line(self, name: str, spec: Spec | None) -> str:
        """The targets a workload of the picker will be judged by (its own, else the built-in's)."""
        from workbench.gui.targets_dialog import targets_text
        from workbench.spec.workloads import builtin_targets

        table = self._workload_table(name)
        workload = next((w for w in spec.workloads if w.name == name), None) if spec else None
        if table is not None and "targets" in table:
            return targets_text(workload.targets if workload else None)
        return targets_text(builtin_targets(name), builtin=True)

    def set_workload_targets(self, name: str, table: dict[str, Any] | None) -> None:
        """Give workload ``name`` its own ``targets`` table (a built-in is ticked first), or with None
        drop them (a built-in's defaults apply again)."""
        workload = self._workload_table(name)
        if workload is None and name in self.builtin_boxes:
            self.draft.set_builtin_workload(name, True, self._common_defaults())
            self._refresh_workloads()
            workload = self._workload_table(name)
        if workload is None:
            return
        if table is None:
            workload.pop("targets", None)
        else:
            workload["targets"] = dict(table)
        self._changed()

    def edit_targets(self, name: str) -> None:
        from workbench.gui.targets_dialog import TargetsDialog
        from workbench.spec.workloads import builtin_targets

        table = self._workload_table(name)
        current = table.get("targets") if table is not None else None
        dialog = TargetsDialog(
            name, current if isinstance(current, dict) else None, builtin_targets(name), self
        )
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.set_workload_targets(name, dialog.table())

    def _edit_custom_targets(self) -> None:
        item = self.custom_list.currentItem() or self.custom_list.item(0)
        if item is not None:
            self.edit_targets(str(item.data(Qt.ItemDataRole.UserRole).get("name")))

    def _refresh_workloads(self) -> None:
        custom = [w for w in self.draft.workloads if "file" in w or "prompts" in w]
        names = {w.get("name") for w in self.draft.workloads if w not in custom}
        for name, box in self.builtin_boxes.items():
            box.blockSignals(True)
            box.setChecked(name in names)
            box.blockSignals(False)
        self.custom_list.clear()
        for w in custom:
            if "file" in w:
                text = f"{w.get('name')} — {w['file']}"
            else:
                n = len(w["prompts"]) if isinstance(w["prompts"], list) else 0
                text = f"{w.get('name')} — {n} prompt(s) written here"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, w)
            self.custom_list.addItem(item)
        self.remove_workload_btn.setEnabled(bool(custom))
        self.custom_targets_btn.setEnabled(bool(custom))

    def _common_defaults(self) -> dict[str, Any]:
        out = {}
        if self.max_new_tokens.value():
            out["max_new_tokens"] = self.max_new_tokens.value()
        if self.limit.value():
            out["limit"] = self.limit.value()
        return out

    def _builtin_toggled(self, name: str, on: bool) -> None:
        defaults = self._common_defaults()
        if name == "sweep-output":
            defaults.pop("max_new_tokens", None)
        self.draft.set_builtin_workload(name, on, defaults)
        self._changed()

    def _add_jsonl(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Workload file", str(self.draft.base_dir), "Prompts (*.jsonl *.json);;All files (*)"
        )
        if path:
            self.add_workload_file(Path(path))

    def add_workload_file(self, path: Path) -> None:
        name = unique_name(path.stem, self.draft.workload_names())
        self.draft.workloads.append({"name": name, "file": str(path), **self._common_defaults()})
        self._refresh_workloads()
        self._changed()

    def _add_prompts(self) -> None:
        dialog = PromptsDialog(self, taken=self.draft.workload_names())
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.add_inline_workload(dialog.table())

    def add_inline_workload(self, table: dict[str, Any]) -> None:
        table = dict(table)
        table["name"] = unique_name(str(table.get("name") or "mine"), self.draft.workload_names())
        self.draft.workloads.append(table)
        self._refresh_workloads()
        self._changed()

    def _edit_custom(self, item: QListWidgetItem) -> None:
        table = item.data(Qt.ItemDataRole.UserRole)
        if "prompts" not in table:
            return
        index = next(i for i, w in enumerate(self.draft.workloads) if w is table or w == table)
        others = [n for n in self.draft.workload_names() if n != table.get("name")]
        dialog = PromptsDialog(self, taken=others, table=table)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.draft.workloads[index] = dialog.table()
            self._refresh_workloads()
            self._changed()

    def _remove_custom(self) -> None:
        item = self.custom_list.currentItem() or self.custom_list.item(0)
        if item is None:
            return
        table = item.data(Qt.ItemDataRole.UserRole)
        self.draft.workloads = [w for w in self.draft.workloads if w != table]
        self._refresh_workloads()
        self._changed()


def _short(description: str) -> str:
    """A workload's description for the picker: its first sentence, cut at a word near
    :data:`DESCRIPTION_CHARS` (the whole one is the tooltip)."""
    first = description.split(". ")[0].rstrip(".")
    if len(first) <= DESCRIPTION_CHARS:
        return first
    return first[:DESCRIPTION_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "…"
