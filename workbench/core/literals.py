"""The string values the workbench stores and compares, each set named once as a ``Literal`` alias.

They live at the bottom layer so that every layer above (spec, store, run, analysis, report, GUI,
CLI) can type its fields and parameters with them; the tuple of values, where code needs one, is
``typing.get_args(alias)``. Imports nothing.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CompileMode",
    "FinishReason",
    "History",
    "Phase",
    "QualityStatus",
    "RunStatus",
    "TimingScope",
    "TrialOrder",
    "TrialOutcome",
    "TrialStatus",
    "VariantStatus",
    "Workers",
    "WorkloadKind",
    "WorkloadSweep",
]

#: a stored trial's ``status``: run to its end, failed (with ``error``), or stopped by a cancel
TrialStatus = Literal["ok", "failed", "cancelled"]

#: what a worker reports for a trial: a stored status, or ``skipped`` (a sweep point beyond the
#: model's context: capped, not stored)
TrialOutcome = Literal["ok", "failed", "cancelled", "skipped"]

#: a run's ``status`` (docs/architecture.md, "What a run's status promises")
RunStatus = Literal["running", "ok", "partial", "failed", "cancelled"]

#: a variant's ``status`` in a run: ``pending`` until its worker loads it, ``loaded``, then how it ended
VariantStatus = Literal["pending", "loaded", "ok", "failed", "cancelled"]

#: the spec's ``order``: how the variants' trials are ordered in time (docs/analysis.md, "How trials are
#: ordered")
TrialOrder = Literal["interleaved", "blocks", "sequential"]

#: the spec's ``workers``: fresh worker processes for every repetition, or one per variant for the run
Workers = Literal["per-repetition", "one"]

#: why a generation ended (``Output.finish_reason``, stored with the trial): the end-of-sequence token,
#: the length limit, or a stop string
FinishReason = Literal["eos", "length", "stop"]

#: a session's ``timing_scope`` (stored with every trial): the model runs in the worker, or the session
#: is a client of a server (its figures include the network and the server's queue)
TimingScope = Literal["in-process", "client"]

#: a variant's quality-pass outcome (``quality_variants.status``): the baseline's ``reference``, a
#: variant ``scored`` against it, ``lossless`` by construction, ``not scored`` (and why), or ``failed``
QualityStatus = Literal["reference", "scored", "lossless", "not scored", "failed"]

#: a workload's ``kind``: prompts (a JSONL file, inline ``prompts`` or a built-in), or conversations
#: whose turns are prompts and whose history is the baseline's answers (docs/spec.md, "Workloads")
WorkloadKind = Literal["prompts", "conversation"]

#: how a conversation workload's history is built (the spec's ``history``): every variant gets the
#: baseline's answers. "own" (each variant fed its own answers) is not built yet: the spec refuses it
History = Literal["baseline-anchored"]

#: a built-in sweep workload's ``sweep``: its prompts cut to exact input lengths, or asking for exact
#: output lengths
WorkloadSweep = Literal["input", "output"]

#: a variant's ``compile`` (torch.compile's mode; ``true`` in a spec is ``default``; eager is None)
CompileMode = Literal["default", "max-autotune", "reduce-overhead"]

#: the phase a lever targets (``Strategy.phase``): the prompt's prefill, the decoding, or both
Phase = Literal["prefill", "decode", "both"]
