"""The string values the workbench stores and compares, each set named once as a ``Literal`` alias.

They live at the bottom layer so that every layer above (spec, store, run, analysis, report, GUI,
CLI) can type its fields and parameters with them; the tuple of values, where code needs one, is
``typing.get_args(alias)``. Imports nothing.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "FinishReason",
    "QualityStatus",
    "RunStatus",
    "TimingScope",
    "TrialOrder",
    "TrialOutcome",
    "TrialStatus",
    "VariantStatus",
    "Workers",
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
