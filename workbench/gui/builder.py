"""The experiment builder: variants (model source + strategy + its parameters), workloads, repetitions.

It edits a :class:`~workbench.gui.draft.SpecDraft` and validates it with the CLI's spec parser after
every change (debounced), so the Run button is enabled exactly when ``workbench run`` would accept
the same spec, and the message under the form is the CLI's own one-line error.

One widget in four modules, by concern: :mod:`.builder_form` (its widgets, laid out, and the fields
every part reads), :mod:`.builder_variants` (the variants and their strategy parameters),
:mod:`.builder_workloads` (the workloads, their targets, their predicted phases) and this one (the
experiment-wide settings, validation, the Run button, each widget's signal wired to its handler). The
parts that stand alone live beside it (``forms.py``: a strategy's parameter form and the model-source
editor; ``prompts.py``: typing prompts by hand; ``draft.py``: the spec as data).
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from workbench.core.errors import WorkbenchError
from workbench.gui.builder_variants import VariantsEditing
from workbench.gui.builder_workloads import WorkloadsEditing
from workbench.gui.draft import SpecDraft
from workbench.spec.parse import WORKERS, Spec

__all__ = ["ONE_VARIANT", "ExperimentBuilder"]

#: why Run is disabled with a single variant (a valid spec, which can still be saved)
ONE_VARIANT = (
    "Add a second variant to compare against (Add, or Duplicate and change one setting): speed-ups "
    "are measured against the baseline."
)


class ExperimentBuilder(VariantsEditing, WorkloadsEditing):
    """Emits ``runRequested`` (Run button) and ``changed`` (any edit)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._validate_timer.timeout.connect(self.validate)
        self._connect_ui()
        self._load_strategies()
        self._load_builtin_workloads()
        self.set_draft(self.draft)

    def _connect_ui(self) -> None:
        """Every field's and button's signal to its handler."""
        self.name_edit.textEdited.connect(self._top_changed)
        self.repetitions.valueChanged.connect(self._top_changed)
        self.warmup.valueChanged.connect(self._top_changed)
        self.order.currentTextChanged.connect(self._top_changed)
        self.workers.currentTextChanged.connect(self._top_changed)
        self.max_new_tokens.valueChanged.connect(self._common_changed)
        self.limit.valueChanged.connect(self._common_changed)
        self.variant_list.currentRowChanged.connect(self._show_variant)
        self.add_variant_btn.clicked.connect(self.add_variant)
        self.dup_variant_btn.clicked.connect(self.duplicate_variant)
        self.remove_variant_btn.clicked.connect(self.remove_variant)
        self.v_name.editingFinished.connect(self._editor_changed)
        self.v_model.changed.connect(self._editor_changed)
        self.v_strategy.currentIndexChanged.connect(self._strategy_changed)
        self.v_dtype.currentIndexChanged.connect(self._editor_changed)
        self.v_device.currentTextChanged.connect(self._editor_changed)
        self.v_trust.toggled.connect(self._editor_changed)
        self.v_python.editingFinished.connect(self._editor_changed)
        self.v_python_browse.clicked.connect(self._browse_python)
        self.add_jsonl_btn.clicked.connect(self._add_jsonl)
        self.add_prompts_btn.clicked.connect(self._add_prompts)
        self.remove_workload_btn.clicked.connect(self._remove_custom)
        self.custom_targets_btn.clicked.connect(self._edit_custom_targets)
        self.custom_list.itemDoubleClicked.connect(self._edit_custom)
        self.run_btn.clicked.connect(self.runRequested)

    # -- public ----------------------------------------------------------------------------------

    def set_draft(self, draft: SpecDraft) -> None:
        self.draft = draft
        self._loading = True
        try:
            self.name_edit.setText(str(draft.top.get("name", "")))
            reps = draft.top.get("repetitions", 3)
            self.repetitions.setValue(0 if reps == "auto" else int(reps) if _is_int(reps) else 3)
            order = draft.top.get("order", "interleaved")
            self.order.setCurrentText(
                order if order in ("interleaved", "blocks", "sequential") else "interleaved"
            )
            self.warmup.setValue(
                int(draft.top.get("warmup", 1)) if _is_int(draft.top.get("warmup", 1)) else 1
            )
            workers = draft.top.get("workers", WORKERS[0])
            if self.workers.findText(str(workers)) < 0:
                self.workers.addItem(str(workers))  # not a valid value: shown, the check names it
            self.workers.setCurrentText(str(workers))
            mnt = draft.common_workload_value("max_new_tokens")
            self.max_new_tokens.setValue(mnt if _is_int(mnt) else 0)
            limit = draft.common_workload_value("limit")
            self.limit.setValue(limit if _is_int(limit) else 0)
            self.v_model.base_dir = draft.base_dir
            self._refresh_variant_list(select=0)
            self._refresh_workloads()
        finally:
            self._loading = False
        self._schedule_validation()

    def set_viewer_reason(self, reason: str | None) -> None:
        """Viewer mode: specs can be built and saved, not run here; say what to install."""
        self._viewer_reason = reason
        self.viewer_note.setText(f"<b>Viewer mode.</b> {reason}" if reason else "")
        self.viewer_note.setVisible(bool(reason))
        self._update_run_button()

    def set_running(self, running: bool) -> None:
        self._running = running
        self._update_run_button()

    def validate(self) -> Spec | None:
        self._validate_timer.stop()
        try:
            self.spec, self.error = self.draft.build(), None
        except WorkbenchError as exc:
            self.spec, self.error = None, str(exc)
        one = self.spec is not None and len(self.spec.variants) < 2
        self.variant_hint.setText("Add a second variant to compare against: Run needs two." if one else "")
        self.variant_hint.setVisible(one)
        self.one_variant = one
        self.refusal = (
            ONE_VARIANT if one else None if self.spec else f"The experiment has a mistake: {self.error}"
        )
        if one:
            assert self.spec is not None
            self._show_predictions(self.spec)
            self.status.setText(f"⚠ {ONE_VARIANT}")
            self.status.setStyleSheet("color: #b26a00;")
        elif self.spec is not None:
            from workbench.run.plan import plan_run

            plans = plan_run(self.spec)
            measured = sum(p.measured for p in plans)
            warm = sum(len(p.trials) for p in plans) - measured
            prompts = sum(len(w.items) for w in self.spec.workloads)
            self.status.setText(
                f"{len(self.spec.variants)} variant(s) × {prompts} prompt(s) in "
                f"{len(self.spec.workloads)} workload(s) × {self.spec.repetitions} repetition(s) = "
                f"{measured} measured trials" + (f" (+{warm} warm-up)" if warm else "")
            )
            self.status.setStyleSheet("")
            self._show_predictions(self.spec)
        else:
            self.status.setText(f"⚠ {self.error}")
            self.status.setStyleSheet("color: #c62828;")
        self._update_run_button()
        self.validated.emit(self.spec)
        return self.spec

    # -- the experiment-wide settings, the Run button ------------------------------------------

    def _top_changed(self, *_: object) -> None:
        if self._loading:
            return
        self.draft.top["name"] = self.name_edit.text()
        self.draft.top["repetitions"] = self.repetitions.value() or "auto"
        self.draft.top["warmup"] = self.warmup.value()
        if self.order.currentText() != "interleaved" or "order" in self.draft.top:
            self.draft.top["order"] = self.order.currentText()
        if self.workers.currentText() != WORKERS[0] or "workers" in self.draft.top:
            self.draft.top["workers"] = self.workers.currentText()
        self._changed()

    def _common_changed(self, *_: object) -> None:
        if self._loading:
            return
        self.draft.set_common_workload_value("max_new_tokens", self.max_new_tokens.value() or None)
        self.draft.set_common_workload_value("limit", self.limit.value() or None)
        self._changed()

    def _update_run_button(self) -> None:
        ok = self.spec is not None and not self.one_variant and not self._running and not self._viewer_reason
        self.run_btn.setEnabled(ok)
        if self._viewer_reason:
            self.run_btn.setToolTip(self._viewer_reason)
        elif self._running:
            self.run_btn.setToolTip("A run is in progress")
        elif self.one_variant:
            self.run_btn.setToolTip("Add a second variant to compare against")
        elif self.error:
            self.run_btn.setToolTip(self.error)
        else:
            self.run_btn.setToolTip("Run the experiment (Ctrl+R)")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
