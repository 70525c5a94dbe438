"""The experiment builder's form: its widgets, laid out (one method per region: the experiment-wide
settings, the variants list, the selected variant's editor, the workloads, the status row), and the
fields every part of the builder reads (the draft being edited, the strategies known, the parameter
form on screen). What the widgets do is beside it: :mod:`.builder_variants` (the variants and their
strategy parameters), :mod:`.builder_workloads` (the workloads, their targets, the predicted phases)
and :mod:`.builder` (:class:`~workbench.gui.builder.ExperimentBuilder`: the settings, validation, the
Run button, the signals wired to their handlers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.draft import SpecDraft
from workbench.gui.forms import ModelSourceEdit, ParamForm, spin
from workbench.gui.glossary import explain
from workbench.spec.parse import DTYPES, WORKERS, Spec

if TYPE_CHECKING:
    from workbench.analysis.phases import Prediction
    from workbench.core.config import ConfigField
    from workbench.core.registry import StrategyInfo

__all__ = ["PYTHON_NOTE", "BuilderForm"]

_DEVICES = ("auto", "cpu", "cuda", "cuda:1", "mps")
#: under the variant's Python field: how to A/B-test a code change (docs/spec.md, docs/analysis.md)
PYTHON_NOTE = (
    "A/B-testing a code change? Best inside one run: two variants, each with <code>python</code> set to "
    "a checkout's own venv (<code>../before/.venv/bin/python</code>, "
    "<code>../after/.venv/bin/python</code>): their trials are interleaved and paired, so the machine's "
    "drift touches both alike."
)


class BuilderForm(QWidget):
    """The builder's widgets and shared fields; emits ``runRequested`` (Run button), ``changed`` (any
    edit) and ``validated`` (the Spec, or None when the draft has a mistake)."""

    runRequested = Signal()
    changed = Signal()
    validated = Signal(object)  # the Spec, or None when the draft has a mistake

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.draft = SpecDraft.new()
        self.spec: Spec | None = None
        self.error: str | None = None
        self._strategies: dict[str, StrategyInfo] = {}  # by name
        self._fields_cache: dict[str, list[ConfigField]] = {}
        self._viewer_reason: str | None = None
        self._running = False
        self.one_variant = False  # the draft is valid but has a single variant: nothing to compare
        #: why Run is refused now (the spec's mistake, a single variant), or None
        self.refusal: str | None = None
        self._loading = False
        self._param_form: ParamForm | None = None
        self._param_strategy: str | None = None
        self._validate_timer = QTimer(self, singleShot=True, interval=250)  # runs validate()
        self._build_ui()

    def _build_ui(self) -> None:
        top = self._build_settings_row()
        variants_box = self._build_variant_list()
        self._build_variant_editor()
        workloads_box = self._build_workloads()
        actions = self._build_status_row()
        self._arrange(top, variants_box, workloads_box, actions)

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
        self.predictions: dict[str, Prediction] = {}  # workload name -> its predicted phase
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

    # -- after any edit ----------------------------------------------------------------------------

    def _changed(self) -> None:
        if self._loading:
            return
        self.changed.emit()
        self._schedule_validation()

    def _schedule_validation(self) -> None:
        self.run_btn.setEnabled(False)
        self._validate_timer.start()
