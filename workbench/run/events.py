"""What a worker process tells its parent: one typed record per event, sent as one JSON line.

The worker (:mod:`workbench.run.worker`) writes ``event.to_json()``; the parent
(:mod:`workbench.run.process`) reads each line with :func:`parse_event` and dispatches on the record's
type. Both sides use these classes, so an event's fields are named in one place and a misspelt kind or
a missing field is an error here, not a silently ignored line. On the wire each record is its fields
plus ``"event": <kind>``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from workbench.core.literals import TrialOutcome
from workbench.store.records import TrialRecord

__all__ = [
    "PROTOCOL",
    "Anchored",
    "Cancelled",
    "Encoded",
    "Event",
    "EventError",
    "Finished",
    "LoadFailed",
    "Loaded",
    "Scored",
    "ServerMetrics",
    "Started",
    "TrialDone",
    "UnitDone",
    "parse_event",
]


#: The version of what parent and worker say to each other (these events, the job and the commands).
#: A worker in another Python environment (a variant's ``python``) must speak the same: the parent
#: checks it before the run (:mod:`workbench.run.interpreter`). Bump it when a message changes shape.
PROTOCOL = 3


class EventError(ValueError):
    """A line that is JSON but not a known event with its fields."""


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str]

    def to_json(self) -> str:
        return json.dumps({"event": self.kind, **dataclasses.asdict(self)}, default=str)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Event:
        """The event from its fields as they came through the pipe (plain JSON values)."""
        return cls(**data)


@dataclass(frozen=True)
class Started(Event):
    """The worker runs (before it reads its job)."""

    kind: ClassVar[str] = "started"
    pid: int


@dataclass(frozen=True)
class Loaded(Event):
    """The variant is loaded; what it reports about itself is stored with the variant."""

    kind: ClassVar[str] = "loaded"
    device: str
    dtype: str | None
    load_ms: float
    compile_ms: float | None = None  # compiling the variant's graphs after loading (compile = ...)
    weights_mb: float | None = None
    context_length: int | None = None
    memory_kind: str | None = None
    memory_bandwidth_gbs: float | None = None
    kv_bytes_per_token: float | None = None
    model_shape: str | None = None  # JSON text
    server: dict[str, Any] | None = None
    backend: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    #: the worker's memory after loading (MB): its own footprint (RSS; CUDA: the allocator's reserve)
    #: and what the device had left. The parent uses them to decide whether another variant fits.
    footprint_mb: float | None = None
    free_mb: float | None = None
    #: a variant's first worker: the modules it imported (what the fork server imports once, so that
    #: its later workers are forked without them: :mod:`workbench.run.forkserver`)
    modules: list[str] | None = None

    def variant_fields(self) -> dict[str, Any]:
        """What the ``variants`` table stores: every field but the machine's environment (the run's),
        the memory figures the parent's residency check uses and the modules."""
        skip = {"environment", "footprint_mb", "free_mb", "modules"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


@dataclass(frozen=True)
class LoadFailed(Event):
    kind: ClassVar[str] = "load_failed"
    error: str


@dataclass(frozen=True)
class TrialDone(Event):
    """One trial of the job (``index`` into its planned trials), with its record and steps. On the
    wire the record is its row (:meth:`TrialRecord.to_row`): the variant's fields still empty, the
    parent fills them."""

    kind: ClassVar[str] = "trial"
    index: int
    status: TrialOutcome
    trial: TrialRecord
    steps: list[dict[str, Any]]

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Event:
        trial = data.get("trial")
        if not isinstance(trial, dict):
            raise TypeError("its trial is not a row")
        return cls(**{**data, "trial": TrialRecord.from_row(trial)})


@dataclass(frozen=True)
class ServerMetrics(Event):
    """A served variant's own figures for a group of trials (indices into the job's trials)."""

    kind: ClassVar[str] = "server_metrics"
    trials: list[int]
    workload: str
    warmup: bool
    figures: dict[str, Any]


@dataclass(frozen=True)
class Encoded(Event):
    """The answer to an ``encode`` command: the token ids of the job's trials' prompts (as the timed
    trials encode them) and of the texts asked for (raw text, no chat template); ``sent``: per trial,
    the prompt as a prompt-changing session feeds it to its model (trimmed, compressed: its
    ``sent_prompt``), ``None`` where it is the prompt itself."""

    kind: ClassVar[str] = "encoded"
    trials: list[list[int]]
    texts: list[list[int]]
    sent: list[list[int] | None] = field(default_factory=list)


@dataclass(frozen=True)
class Anchored(Event):
    """One conversation of an ``anchor`` command (untimed, the baseline's worker, before the measured
    trials): its greedy ``answers``, turn by turn, each generated with the answers before it as
    history, and per turn the prompt tokens of that history; or ``error`` (the turn that failed)."""

    kind: ClassVar[str] = "anchored"
    workload: str
    conversation: str
    answers: list[str] = field(default_factory=list)
    history_tokens: list[int] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Scored(Event):
    """One item of a ``score`` command: its scores are in the ``.npz`` file ``path`` (written by the
    worker, read and removed by the parent), or ``error`` says why there are none."""

    kind: ClassVar[str] = "scored"
    item: int
    path: str | None = None
    positions: int = 0
    method: str | None = None  # full | top-k
    score_ms: float | None = None
    error: str | None = None
    unsupported: bool = False  # the session has no scoring hook (``error`` says so)


@dataclass(frozen=True)
class UnitDone(Event):
    """The group of trials the parent asked for is done; the worker waits for the next command."""

    kind: ClassVar[str] = "unit_done"
    trials: list[int]


@dataclass(frozen=True)
class Finished(Event):
    kind: ClassVar[str] = "finished"


@dataclass(frozen=True)
class Cancelled(Event):
    kind: ClassVar[str] = "cancelled"


_KINDS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        Started,
        Loaded,
        LoadFailed,
        TrialDone,
        ServerMetrics,
        Encoded,
        Anchored,
        Scored,
        UnitDone,
        Finished,
        Cancelled,
    )
}


def parse_event(line: str) -> Event:
    """One line from a worker as its event. Raises ``json.JSONDecodeError`` for a line that is not
    JSON (a library printing to the stream) and :class:`EventError` for JSON that is not an event."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise EventError(f"not an event: {line[:200]!r}")
    cls = _KINDS.get(data.pop("event", None))
    if cls is None:
        raise EventError(f"unknown event: {line[:200]!r}")
    try:
        return cls.from_wire(data)
    except TypeError as exc:
        raise EventError(f"{cls.kind} event with wrong fields ({exc}): {line[:200]!r}") from None
