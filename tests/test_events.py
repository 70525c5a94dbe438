"""The worker → parent event records: one JSON line each, parsed back into the same record."""

from __future__ import annotations

import json

import pytest

from workbench.run import events as ev
from workbench.store import TrialRecord


@pytest.mark.parametrize(
    "event",
    [
        ev.Started(pid=12),
        ev.Loaded(device="cpu", dtype="float32", load_ms=1.5, weights_mb=3.0, environment={"cpu": "x"}),
        ev.LoadFailed(error="no such model"),
        ev.TrialDone(
            index=3,
            status="ok",
            trial=TrialRecord(ttft_ms=1.0, workload="w"),
            steps=[{"idx": 0, "t_ms": 1.0}],
        ),
        ev.ServerMetrics(trials=[0, 1], workload="chat", warmup=False, figures={"ttft_ms": 2.0}),
        ev.Finished(),
        ev.Cancelled(),
    ],
)
def test_every_event_round_trips_through_one_json_line(event):
    line = event.to_json()
    assert "\n" not in line
    assert json.loads(line)["event"] == event.kind
    assert ev.parse_event(line + "\n") == event


def test_loaded_gives_the_variant_columns():
    loaded = ev.Loaded(device="cuda:0", dtype="bfloat16", load_ms=10.0, server={"url": "u"})
    fields = loaded.variant_fields()
    assert "environment" not in fields and {"weights_mb", "memory_bandwidth_gbs", "model_shape"} <= set(
        fields
    )
    assert fields["device"] == "cuda:0" and fields["server"] == {"url": "u"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"event": "nope"}', "unknown event"),
        ('{"pid": 3}', "unknown event"),
        ("[1, 2]", "not an event"),
        ('{"event": "trial", "index": 1}', "trial event with wrong fields"),
        # a trial row with a key that is no column of trials: refused, not silently dropped
        (
            '{"event": "trial", "index": 1, "status": "ok", "trial": {"ttft": 1.0}, "steps": []}',
            "trial event with wrong fields",
        ),
        ('{"event": "started", "pid": 1, "extra": 2}', "started event with wrong fields"),
    ],
)
def test_json_that_is_not_an_event_is_refused(line, message):
    with pytest.raises(ev.EventError, match=message):
        ev.parse_event(line)


def test_a_line_that_is_not_json_is_a_decode_error():
    # a library printing to the event stream: the parent logs such lines instead of failing
    with pytest.raises(json.JSONDecodeError):
        ev.parse_event("Loading weights: 100%")
