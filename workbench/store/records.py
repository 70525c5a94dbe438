"""The records the store holds, typed once: :class:`TrialRecord` is one row of the ``trials`` table;
:class:`RunRecord` and :class:`VariantRecord` are rows of ``runs`` and ``variants`` as analysis reads them.

A trial's row is built in three processes: the runner (inside the worker) measures it, the worker adds
what the machine did meanwhile, the parent adds the variant, the design's position, the worker number
and the disturbance verdict, and writes it; analysis reads it back. Each step is
``dataclasses.replace`` on one frozen record, so every column is named here and nowhere else.
Across the worker → parent pipe and into SQLite a record travels as :meth:`TrialRecord.to_row`; it
comes back with :meth:`TrialRecord.from_row`.

The fields are exactly the ``trials`` table's columns as :mod:`workbench.store.schema` migrates them
(``tests/test_store.py`` holds the two equal): a new column is a migration *and* a field here. The
types are the columns' as SQLite returns them (``warmup``, ``matches_baseline``, ``disturbed`` are
0/1 integers; ``output_token_ids`` is JSON text), so a row read back equals the row written.

Steps stay rows: they are typed once already (``workbench.run.metrics.StepRecord``, written through
its ``to_row``), and their readers that matter (the draft analysis, the export) stream millions of
them as tuples, where a record per step would only cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from workbench.core.literals import CompileMode, FinishReason, TimingScope, TrialStatus

__all__ = [
    "RUN_COLUMNS",
    "TRIAL_COLUMNS",
    "VARIANT_COLUMNS",
    "RunRecord",
    "TrialRecord",
    "VariantRecord",
]


@dataclass(frozen=True)
class TrialRecord:
    """One trial: what was asked, what was measured, and how it compared (a ``trials`` row)."""

    id: int | None = None  # set by the store
    run_id: int | None = None  # set by the store
    # the variant (added by the parent)
    variant: str = ""
    strategy: str = ""
    model: str = ""
    # the planned trial (the runner, from its TrialPlan)
    workload: str = ""
    prompt_id: str = ""
    repetition: int = 0
    warmup: int = 0  # 1 for a warm-up (stored, never in a statistic)
    status: TrialStatus | Literal[""] = ""  # "" until the runner sets it
    error: str | None = None
    # measured (the runner; see workbench.run.metrics for the definitions)
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_ms: float | None = None
    tpot_ms: float | None = None
    decode_tokens_per_s: float | None = None
    e2e_ms: float | None = None
    peak_memory_mb: float | None = None
    draft_tokens_proposed: int | None = None
    draft_tokens_accepted: int | None = None
    output_text: str | None = None
    # compared with the baseline's greedy output (analysis, once the run has finished)
    matches_baseline: int | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    max_new_tokens: int | None = None
    finish_reason: FinishReason | None = None
    seed: int | None = None
    temperature: float | None = None  # 0 = greedy
    started_at: str | None = None
    output_token_ids: str | None = None  # JSON list; None when the strategy reported counts only
    first_divergence: int | None = None
    match_fraction: float | None = None
    draft_steps: int | None = None
    cached_tokens: int | None = None
    trimmed_tokens: int | None = None
    timing_scope: TimingScope | None = None
    token_count_source: str | None = None
    concurrency: int | None = None
    concurrent_group: int | None = None
    group_offset_ms: float | None = None
    batch_size: int | None = None
    # the design (the runner: round; the parent: the position in it)
    round: int | None = None
    round_position: int | None = None
    # what the machine did meanwhile (the worker) and the verdict on it (the parent)
    cpu_ms: float | None = None
    cpu_wait_ms: float | None = None
    load_avg: float | None = None
    gpu_clock_mhz: int | None = None
    gpu_temp_c: int | None = None
    disturbed: int | None = None
    disturbance: str | None = None
    worker: int | None = None  # which worker process of the variant ran it (the parent)
    #: CUDA via NVML: what held the clocks down while the trial's unit ran ("" nothing; NULL unknown)
    gpu_throttle: str | None = None
    compress_ms: float | None = None  # prompt compression: from the trial's start to the prompt compressed
    compress_rate: float | None = None  # prompt compression: the share of the prompt asked to be kept
    turn: int | None = None  # a conversation workload's turn (1-based)
    history_tokens: int | None = None  # a conversation turn's prompt tokens before its user message
    recompiles: int | None = None  # torch.compile graphs compiled during it (None: not compiled)
    #: frames torch.compile gave up compiling (its recompile limit hit) in the worker process so far,
    #: at the trial's end: > 0, the trial ran (partly) eagerly (None: not compiled)
    eager_fallbacks: int | None = None
    cudagraph_records: int | None = None  # CUDA graphs recorded during it (None: not compiled)
    #: the KV cache the session held at the trial's end, its kept copies included (None: cannot tell)
    kv_held_tokens: int | None = None
    kv_held_bytes: int | None = None
    #: prompt compression: JSON {part: tokens} of what it could not drop (None: within the budget)
    compress_protected: str | None = None

    @classmethod
    def failed(
        cls,
        error: str,
        *,
        variant: str,
        strategy: str,
        model: str,
        workload: str,
        prompt_id: str,
        repetition: int,
        warmup: bool,
        max_new_tokens: int,
        seed: int | None,
        temperature: float,
    ) -> TrialRecord:
        """A planned trial that never ran (its worker could not load, or died first): what was asked,
        ``status = "failed"`` and why; nothing measured."""
        return cls(
            variant=variant,
            strategy=strategy,
            model=model,
            workload=workload,
            prompt_id=prompt_id,
            repetition=repetition,
            warmup=int(warmup),
            max_new_tokens=max_new_tokens,
            seed=seed,
            temperature=temperature,
            status="failed",
            error=error,
        )

    def to_row(self) -> dict[str, Any]:
        """Every column and its value (``id`` and ``run_id`` None until stored)."""
        return {name: getattr(self, name) for name in TRIAL_COLUMNS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TrialRecord:
        """A record from a ``trials`` row (or a part of one: the rest keeps its defaults). A key that
        is no column is an error, not a value silently dropped."""
        unknown = set(row) - _COLUMN_SET
        if unknown:
            raise TypeError(f"not columns of trials: {', '.join(sorted(unknown))}")
        return cls(**row)

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> TrialRecord:
        """A record from a whole row's values in :data:`TRIAL_COLUMNS` order: the record
        ``cls(*values)`` makes, without the frozen ``__init__``'s call per field (a store reading
        10,000 trials spends a third of a second in those)."""
        record = object.__new__(cls)
        record.__dict__.update(zip(TRIAL_COLUMNS, values, strict=True))
        return record

    @property
    def measured(self) -> bool:
        """A measured trial that finished: what every statistic uses (warm-ups and failures are not)."""
        return self.status == "ok" and not self.warmup

    @property
    def in_conversation(self) -> bool:
        """A turn of a conversation workload (it carries its :attr:`turn`)."""
        return self.turn is not None


#: the ``trials`` table's columns, in the table's order
TRIAL_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TrialRecord))
_COLUMN_SET = frozenset(TRIAL_COLUMNS)


# -- a run and its variants, as analysis reads them back ----------------------------------------------


R = TypeVar("R", bound="_Row")


class _Row:
    """A row of ``table`` as a frozen dataclass whose fields are the table's columns, in its order."""

    table: ClassVar[str]

    @classmethod
    def from_row(cls: type[R], row: Mapping[str, Any]) -> R:
        """A record from a row of the table; a key that is no column is an error."""
        unknown = set(row) - set(cls.columns())
        if unknown:
            raise TypeError(f"not columns of {cls.table}: {', '.join(sorted(unknown))}")
        return cls(**row)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def to_row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.columns()}


@dataclass(frozen=True)
class RunRecord(_Row):
    """One ``runs`` row (the run's spec text and environment JSON included), as analysis reads it."""

    table: ClassVar[str] = "runs"

    id: int
    name: str | None = None
    started_at: str | None = None  # ISO 8601, UTC
    finished_at: str | None = None
    status: str | None = None  # running | ok | partial | failed | cancelled
    spec: str | None = None  # the spec TOML as written
    environment: str | None = None  # JSON: host, CPU, GPU, libraries
    baseline: str | None = None
    pid: int | None = None
    host: str | None = None
    workbench_version: str | None = None
    trial_order: str | None = None  # interleaved | blocks | sequential: what ran
    trial_order_note: str | None = None
    repetitions: int | None = None  # measured repetitions that ran
    workers: str | None = None  # per-repetition | one
    error: str | None = None


@dataclass(frozen=True)
class VariantRecord(_Row):
    """One ``variants`` row: what a variant was and how it loaded (``params``, ``model_shape``,
    ``server`` and ``packages`` are JSON text)."""

    table: ClassVar[str] = "variants"

    id: int | None = None
    run_id: int | None = None
    name: str = ""
    strategy: str | None = None
    model: str | None = None
    dtype: str | None = None  # as resolved ("auto" -> "float32" ...)
    device: str | None = None  # as resolved ("auto" -> "cuda:0" ...)
    params: str | None = None
    status: str | None = None  # pending | loaded | ok | failed | cancelled
    error: str | None = None
    load_ms: float | None = None
    weights_mb: float | None = None
    context_length: int | None = None
    memory_kind: str | None = None  # cuda_allocator_peak | process_rss_peak | nvml_process | ...
    sweep_param: str | None = None
    sweep_value: str | None = None
    memory_bandwidth_gbs: float | None = None
    kv_bytes_per_token: float | None = None
    model_shape: str | None = None
    concurrency: int | None = None
    server: str | None = None
    batch_size: int | None = None
    threads: int | None = None
    python: str | None = None
    packages: str | None = None
    backend: str | None = None  # where the runtime computed, when the device does not say it all
    compile: CompileMode | None = None  # its torch.compile mode; None = eager
    compile_ms: float | None = None  # its first worker's compile before the first trial (cold)
    recompile_ms: float | None = None  # its later workers' compile (median; None: no later worker)


#: the ``runs`` and ``variants`` tables' columns, in the tables' order
RUN_COLUMNS: tuple[str, ...] = RunRecord.columns()
VARIANT_COLUMNS: tuple[str, ...] = VariantRecord.columns()
