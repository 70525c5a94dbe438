"""The experiment builder: variants (model source + strategy + its parameters), workloads, repetitions.

It edits a :class:`~workbench.gui.draft.SpecDraft` and validates it with the CLI's spec parser after
every change (debounced), so the Run button is enabled exactly when ``workbench run`` would accept
the same spec, and the message under the form is the CLI's own one-line error.

Over 600 lines on purpose: it is one widget, whose layout (``_build_ui``, one method per region) and
handlers read the same fields; the parts that stand alone live beside it (``forms.py``: a strategy's parameter form and the
model-source editor; ``prompts.py``: typing prompts by hand; ``draft.py``: the spec as data).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from workbench.core.errors import WorkbenchError
from workbench.formatting import percent
from workbench.gui.draft import SpecDraft, is_suggested_name, suggested_name, unique_name
from workbench.gui.forms import ModelSourceEdit, ParamForm, spin
from workbench.gui.glossary import explain
from workbench.gui.prompts import PromptsDialog
from workbench.spec.parse import DTYPES, WORKERS, Spec

__all__ = ["ExperimentBuilder"]

_COMMON_KEYS = ("name", "model", "strategy", "dtype", "device", "trust_remote_code", "python")
_DEVICES = ("auto", "cpu", "cuda", "cuda:1", "mps")
#: why Run is disabled with a single variant (a valid spec, which can still be saved)
ONE_VARIANT = (
    "Add a second variant to compare against (Add, or Duplicate and change one setting): speed-ups "
    "are measured against the baseline."
)
#: a workload's description in the picker is cut to this many characters (the whole one is its tooltip)
DESCRIPTION_CHARS = 46
#: under the variant's Python field: how to A/B-test a code change (docs/spec.md, docs/analysis.md)
PYTHON_NOTE = (
    "A/B-testing a code change? Best inside one run: two variants, each with <code>python</code> set to "
    "a checkout's own venv (<code>../before/.venv/bin/python</code>, "
    "<code>../after/.venv/bin/python</code>): their trials are interleaved and paired, so the machine's "
    "drift touches both alike."
)


class ExperimentBuilder(QWidget):
    """Emits ``runRequested`` (Run button) and ``changed`` (any edit)."""

    runRequested = Signal()
    changed = Signal()
    validated = Signal(object)  # the Spec, or None when the draft has a mistake

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.draft = SpecDraft.new()
        self.spec: Spec | None = None
        self.error: str | None = None
        self._strategies: dict[str, Any] = {}  # name -> StrategyInfo
        self._fields_cache: dict[str, list[Any]] = {}
        self._viewer_reason: str | None = None
        self._running = False
        self.one_variant = False  # the draft is valid but has a single variant: nothing to compare
        #: why Run is refused now (the spec's mistake, a single variant), or None
        self.refusal: str | None = None
        self._loading = False
        self._param_form: ParamForm | None = None
        self._param_strategy: str | None = None
        self._validate_timer = QTimer(self, singleShot=True, interval=250)
        self._validate_timer.timeout.connect(self.validate)
        self._build_ui()
        self._load_strategies()
        self.set_draft(self.draft)

    # -- layout ----------------------------------------------------------------------------------

    def _build_ui(self) -> None:
        top = self._build_settings_row()
        variants_box = self._build_variant_list()
        self._build_variant_editor()
        workloads_box = self._build_workloads()
        actions = self._build_status_row()
        self._arrange(top, variants_box, workloads_box, actions)
        self._connect_ui()

    def _build_settings_row(self) -> QHBoxLayout:
        """The experiment-wide settings: name, repetitions, warm-up, order, workers, limits."""
        self.name_edit = QLineEdit()
        self.name_edit.setObjectName("experimentName")
        self.repetitions = spin(0, 10_000, explain("repetitions"), special="auto")
        self.warmup = spin(0, 100, explain("warm-up"))
        self.order = QComboBox()
        self.order.setObjectName("trialOrder")
        self.order.addItems(["interleaved", "blocks", "sequential"])
        self.order.setToolTip(explain("order"))
        self.max_new_tokens = spin(0, 1_000_000, explain("max new tokens"), special="per workload")
        self.limit = spin(0, 1_000_000, explain("limit"), special="all")
        self.workers = QComboBox()
        self.workers.setObjectName("workersCombo")
        self.workers.addItems(list(WORKERS))
        self.workers.setToolTip(
            "Worker processes (interleaved runs): per-repetition starts every variant's workers afresh "
            "for each repetition, so a slow process cannot pass for a slow variant and the intervals "
            "count process pairs; one: one process per variant for the whole run (faster to start)"
        )
        top = QHBoxLayout()
        top.addWidget(QLabel("Experiment"))
        top.addWidget(self.name_edit, 2)
        for label, w in (
            ("Repetitions", self.repetitions),
            ("Warm-up", self.warmup),
            ("Order", self.order),
            ("Workers", self.workers),
            ("Max new tokens", self.max_new_tokens),
            ("Prompts per workload", self.limit),
        ):
            lab = QLabel(label)
            lab.setToolTip(w.toolTip())
            top.addSpacing(8)
            top.addWidget(lab)
            top.addWidget(w)
        return top

    def _build_variant_list(self) -> QGroupBox:
        """The variants list, its buttons, and the hint when there is only one."""
        self.variant_list = QListWidget()
        self.variant_list.setObjectName("variantList")
        self.add_variant_btn = QPushButton("Add")
        self.dup_variant_btn = QPushButton("Duplicate")
        self.remove_variant_btn = QPushButton("Remove")
        self.add_variant_btn.setToolTip("Add a variant (a model + strategy + parameters to compare)")
        self.dup_variant_btn.setToolTip("Copy the selected variant, e.g. to change one parameter")
        buttons = QHBoxLayout()
        for b in (self.add_variant_btn, self.dup_variant_btn, self.remove_variant_btn):
            buttons.addWidget(b)
        variants_box = QGroupBox("Variants")
        vl = QVBoxLayout(variants_box)
        vl.addWidget(self.variant_list, 1)
        vl.addLayout(buttons)
        self.variant_hint = QLabel()
        self.variant_hint.setObjectName("variantHint")
        self.variant_hint.setWordWrap(True)
        self.variant_hint.setStyleSheet("color: #b26a00;")
        self.variant_hint.hide()
        vl.addWidget(self.variant_hint)
        return variants_box

    def _build_variant_editor(self) -> None:
        """The selected variant (``variant_editor``): its common fields, its strategy's parameters."""
        self.v_name = QLineEdit()
        self.v_model = ModelSourceEdit()
        self.v_strategy = QComboBox()
        self.v_strategy.setObjectName("strategyCombo")
        self.v_strategy_help = QLabel()
        self.v_strategy_help.setWordWrap(True)
        self.v_strategy_help.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.v_dtype = QComboBox()
        self.v_dtype.addItems(list(DTYPES))
        self.v_dtype.setToolTip("auto: bf16 on CUDA, fp16 on MPS, fp32 on CPU")
        self.v_device = QComboBox()
        self.v_device.setEditable(True)
        self.v_device.addItems(list(_DEVICES))
        self.v_device.setToolTip("auto: CUDA, then MPS, then CPU")
        self.v_python = QLineEdit()
        self.v_python.setObjectName("variantPython")
        self.v_python.setPlaceholderText("this workbench's own (leave empty), or another venv's bin/python")
        self.v_python.setToolTip(
            "python: the interpreter this variant's worker runs with — another virtual environment with "
            "its own library versions or code (it must have this workbench installed); relative to the spec"
        )
        self.v_python_browse = QPushButton("Browse…")
        self.v_python_browse.clicked.connect(self._browse_python)
        self.python_note = QLabel(PYTHON_NOTE)
        self.python_note.setObjectName("pythonNote")
        self.python_note.setWordWrap(True)
        self.python_note.setTextFormat(Qt.TextFormat.RichText)
        self.python_note.setEnabled(False)  # greyed: a hint, not a field
        self.v_trust = QCheckBox("trust remote code")
        self.v_trust.setToolTip("Run code shipped with a hub model (off unless you trust its authors)")
        self.params_box = QGroupBox("Parameters")
        self.params_layout = QVBoxLayout(self.params_box)
        # the selected variant: what every variant has on the left, its strategy's parameters beside
        # it with the whole height (each side scrolls on its own when it must)
        common = QWidget()
        form = QFormLayout(common)
        form.addRow("Name", self.v_name)
        form.addRow("Model", self.v_model)
        strategy_box = QWidget()
        sl = QVBoxLayout(strategy_box)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.setSpacing(2)
        sl.addWidget(self.v_strategy)
        sl.addWidget(self.v_strategy_help)
        form.addRow("Strategy", strategy_box)
        form.addRow("dtype", self.v_dtype)
        form.addRow("Device", self.v_device)
        form.addRow("", self.v_trust)
        python_row = QHBoxLayout()
        python_row.setContentsMargins(0, 0, 0, 0)
        python_row.addWidget(self.v_python, 1)
        python_row.addWidget(self.v_python_browse)
        form.addRow("Python", python_row)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(common)
        left_layout.addWidget(self.python_note)
        left_layout.addStretch(1)
        self.params_layout.addStretch(1)  # the form (inserted above it) keeps its rows' heights
        self.variant_editor = QGroupBox("Selected variant")
        el = QHBoxLayout(self.variant_editor)
        for widget, stretch in ((left, 1), (self.params_box, 1)):
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QScrollArea.Shape.NoFrame)
            scroll.setWidget(widget)
            el.addWidget(scroll, stretch)

    def _build_workloads(self) -> QGroupBox:
        """The workloads: the built-in ones' grid, your prompts, their buttons."""
        self.builtin_boxes: dict[str, QCheckBox] = {}
        self.builtin_labels: dict[str, tuple[QLabel, str]] = {}
        self.predictions: dict[str, Any] = {}  # workload name -> phases.Prediction
        self.builtin_grid = QGridLayout()
        self.custom_list = QListWidget()
        self.custom_list.setObjectName("customWorkloads")
        self.custom_list.setMaximumHeight(90)
        self.add_jsonl_btn = QPushButton("Load JSONL…")
        self.add_jsonl_btn.setToolTip(
            'A file with one {"id": ..., "prompt": ...} or {"id": ..., "messages": [...]} per line'
        )
        self.add_prompts_btn = QPushButton("Write prompts…")
        self.add_prompts_btn.setToolTip("Type your own prompts; they are kept inside the spec")
        self.remove_workload_btn = QPushButton("Remove")
        self.custom_targets_btn = QPushButton("Targets…")
        self.custom_targets_btn.setObjectName("customTargets")
        self.custom_targets_btn.setToolTip("The experience targets of the selected workload of yours")
        self.target_buttons: dict[str, QPushButton] = {}
        wbuttons = QVBoxLayout()
        for b in (
            self.add_jsonl_btn,
            self.add_prompts_btn,
            self.custom_targets_btn,
            self.remove_workload_btn,
        ):
            wbuttons.addWidget(b)
        wbuttons.addStretch(1)
        workloads_box = QGroupBox("Workloads")
        wl = QHBoxLayout(workloads_box)
        wl.addLayout(self.builtin_grid, 4)
        custom = QVBoxLayout()
        custom.addWidget(QLabel("Your prompts"))
        custom.addWidget(self.custom_list)
        wl.addLayout(custom, 1)
        wl.addLayout(wbuttons)
        return workloads_box

    def _build_status_row(self) -> QHBoxLayout:
        """The validation status (the CLI's own message), the viewer note, Save and Run."""
        self.status = QLabel()
        self.status.setObjectName("builderStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.viewer_note = QLabel()
        self.viewer_note.setWordWrap(True)
        self.viewer_note.setVisible(False)
        self.save_btn = QPushButton("Save spec…")
        self.run_btn = QPushButton("Run")
        self.run_btn.setObjectName("runButton")
        self.run_btn.setDefault(True)
        actions = QHBoxLayout()
        actions.addWidget(self.status, 1)
        actions.addWidget(self.save_btn)
        actions.addWidget(self.run_btn)
        return actions

    def _arrange(
        self, top: QHBoxLayout, variants_box: QGroupBox, workloads_box: QGroupBox, actions: QHBoxLayout
    ) -> None:
        """The regions in the builder's layout: settings above, the splitters, the status row below."""
        # the selected variant's form (its strategy parameters above all) gets the room: wider than the
        # variants list, taller than the workloads
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(variants_box)
        self.splitter.addWidget(self.variant_editor)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 4)
        self.splitter.setSizes([260, 1040])
        self.vsplit = QSplitter(Qt.Orientation.Vertical)
        self.vsplit.addWidget(self.splitter)
        self.vsplit.addWidget(workloads_box)
        self.vsplit.setStretchFactor(0, 3)
        self.vsplit.setStretchFactor(1, 1)
        self.vsplit.setChildrenCollapsible(False)
        self.vsplit.setSizes([430, 270])

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.vsplit, 1)
        layout.addWidget(self.viewer_note)
        layout.addLayout(actions)

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
        self.add_jsonl_btn.clicked.connect(self._add_jsonl)
        self.add_prompts_btn.clicked.connect(self._add_prompts)
        self.remove_workload_btn.clicked.connect(self._remove_custom)
        self.custom_targets_btn.clicked.connect(self._edit_custom_targets)
        self.custom_list.itemDoubleClicked.connect(self._edit_custom)
        self.run_btn.clicked.connect(self.runRequested)

    def _load_strategies(self) -> None:
        from workbench.core.registry import list_strategies
        from workbench.spec.workloads import builtin_names, builtin_workload

        for info in list_strategies():
            self._strategies[info.name] = info
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

    # -- variants --------------------------------------------------------------------------------

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
            self._rebuild_params(strategy, {k: val for k, val in v.items() if k not in _COMMON_KEYS})
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

    def _strategy_fields(self, name: str) -> list[Any]:
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
            if k not in _COMMON_KEYS and (k in new_fields or k not in old_fields)
        }
        self.draft.variants[row] = {**{k: val for k, val in v.items() if k in _COMMON_KEYS}, **params}
        self._describe_strategy(new)
        self._rebuild_params(new, params)
        self._editor_changed()

    def _editor_changed(self, *_: Any) -> None:
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
        new.update({k: val for k, val in old.items() if k not in _COMMON_KEYS and k not in field_names})
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

    # -- workloads -------------------------------------------------------------------------------

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

    # -- plumbing --------------------------------------------------------------------------------

    def _top_changed(self, *_: Any) -> None:
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

    def _common_changed(self, *_: Any) -> None:
        if self._loading:
            return
        self.draft.set_common_workload_value("max_new_tokens", self.max_new_tokens.value() or None)
        self.draft.set_common_workload_value("limit", self.limit.value() or None)
        self._changed()

    def _changed(self) -> None:
        if self._loading:
            return
        self.changed.emit()
        self._schedule_validation()

    def _schedule_validation(self) -> None:
        self.run_btn.setEnabled(False)
        self._validate_timer.start()

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


def _short(description: str) -> str:
    """A workload's description for the picker: its first sentence, cut at a word near
    :data:`DESCRIPTION_CHARS` (the whole one is the tooltip)."""
    first = description.split(". ")[0].rstrip(".")
    if len(first) <= DESCRIPTION_CHARS:
        return first
    return first[:DESCRIPTION_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
