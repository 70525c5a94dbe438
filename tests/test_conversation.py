"""Conversation workloads: the file format and its errors, the built-in set, and a real run through
worker processes where the baseline anchors the history and every variant gets identical prompts."""

from __future__ import annotations

import json

import pytest

from workbench.core.errors import SpecError
from workbench.run.plan import plan_run
from workbench.spec.parse import parse_spec
from workbench.spec.workloads import builtin_workload, turn_messages

VARIANT = '[[variants]]\nname = "a"\nstrategy = "fake"\n'


def conversations_file(tmp_path, lines):
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def spec_with(path, extra=""):
    return parse_spec(
        VARIANT + f'[[workloads]]\nname = "talk"\nkind = "conversation"\nfile = "{path}"\n{extra}'
    )


def test_each_turn_is_a_prompt_with_its_turn_number(tmp_path):
    path = conversations_file(
        tmp_path,
        [
            {"id": "c1", "system": "be brief", "turns": ["hi", "more", "end"]},
            {"id": "c2", "turns": ["x", "y"]},
        ],
    )
    spec = spec_with(path, "max_new_tokens = 5\n")
    (workload,) = spec.workloads
    assert [i.prompt.id for i in workload.items] == ["c1/t01", "c1/t02", "c1/t03", "c2/t01", "c2/t02"]
    assert [i.turn for i in workload.items] == [1, 2, 3, 1, 2]
    assert {i.max_new_tokens for i in workload.items} == {5}
    (plan,) = plan_run(spec)
    assert [t.turn for t in plan.trials if not t.warmup and t.repetition == 0] == [1, 2, 3, 1, 2]
    # whole conversations are kept by 'limit'
    assert len(spec_with(path, "limit = 1\n").workloads[0].items) == 3


def test_turn_messages_interleave_the_answers():
    c = builtin_workload("conversation").conversations[0]
    messages = turn_messages(c, 3, ["A1", "A2"])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["A1", "A2"]
    assert messages[-1]["content"] == c.users[2]


def test_the_built_in_set_has_three_conversations_of_eight_turns():
    w = builtin_workload("conversation")
    assert len(w.conversations) >= 3
    assert all(len(c.users) >= 8 for c in w.conversations)
    assert all(c.max_new_tokens >= 160 for c in w.conversations)  # ~2k tokens of history by turn 8


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"id": "c", "turns": []}, "non-empty list of user messages"),
        ({"id": "c", "turns": ["a"], "answers": ["b"]}, "unknown key 'answers'.*answers are generated"),
        ({"turns": ["a"]}, 'missing "id"'),
        ({"id": "c", "turns": ["a"], "max_new_tokens": 0}, "max_new_tokens"),
    ],
)
def test_bad_conversations_are_refused_in_one_line(tmp_path, line, problem):
    path = conversations_file(tmp_path, [line])
    with pytest.raises(SpecError, match=problem):
        spec_with(path)


def test_own_history_is_refused_in_one_line(tmp_path):
    path = conversations_file(tmp_path, [{"id": "c", "turns": ["a"]}])
    with pytest.raises(SpecError, match=r'history = "own".*not supported yet'):
        spec_with(path, 'history = "own"\n')
    with pytest.raises(SpecError, match="'history' applies to conversation workloads only"):
        parse_spec(VARIANT + '[[workloads]]\nname = "code"\nhistory = "baseline-anchored"\n')
    with pytest.raises(SpecError, match="needs a 'file' of conversations"):
        parse_spec(VARIANT + '[[workloads]]\nname = "x"\nkind = "conversation"\n')


# -- a real run ---------------------------------------------------------------------------------------


def test_a_run_anchors_the_history_on_the_baseline_s_answers(tmp_path, tiny_model_dir, db_path):
    pytest.importorskip("torch")
    from workbench.run.execute import RunExecutor
    from workbench.store import Store
    from workbench.testing.helpers import tiny_prompt

    path = conversations_file(
        tmp_path,
        [{"id": "c1", "system": tiny_prompt(6, 3), "turns": [tiny_prompt(8, 10 * k) for k in range(3)]}],
    )
    text = (
        "repetitions = 2\nwarmup = 1\n"
        f'[[variants]]\nname = "baseline"\nstrategy = "baseline"\nmodel = "{tiny_model_dir}"\nthreads = 1\n'
        f'[[variants]]\nname = "cache"\nstrategy = "prefix-cache"\nmodel = "{tiny_model_dir}"\nthreads = 1\n'
        "min_prefix_tokens = 2\n"
        f'[[workloads]]\nname = "talk"\nkind = "conversation"\nfile = "{path}"\nmax_new_tokens = 6\n'
    )
    store = Store(db_path)
    executor = RunExecutor(parse_spec(text), store)
    result = executor.run()
    assert result.status == "ok", result
    turns = store.conversation_turns(result.run_id)
    assert [(t["conversation"], t["turn"]) for t in turns] == [("c1", 1), ("c1", 2), ("c1", 3)]
    assert turns[0]["history_tokens"] == 0 < turns[1]["history_tokens"] < turns[2]["history_tokens"]
    # every variant was planned the same anchored prompts, holding the baseline's answers
    prompts = [[(t.prompt.id, t.prompt.messages) for t in p.trials] for p in executor.plans]
    assert prompts[0] == prompts[1]
    last = dict(prompts[0])["c1/t03"]
    assert [m["content"] for m in last if m["role"] == "assistant"] == [t["answer"] for t in turns[:2]]
    measured = [t for t in store.trials(result.run_id) if not t.warmup]
    assert {(t.variant, t.turn) for t in measured} == {
        (v, k) for v in ("baseline", "cache") for k in (1, 2, 3)
    }
    history = {t["turn"]: t["history_tokens"] for t in turns}
    assert all(t.history_tokens == history[t.turn] for t in measured)
    # the baseline's timed answers are the anchored ones (greedy, same model)
    assert all(t.output_text == turns[t.turn - 1]["answer"] for t in measured if t.variant == "baseline")
    # the prefix cache reused the previous turn's prompt from turn 2 on
    reused = {t.turn: t.cached_tokens for t in measured if t.variant == "cache" and t.repetition == 0}
    assert reused[1] == 0 and reused[2] > 0 and reused[3] > reused[2]
    # the chart: TTFT against the turn, one line per variant, rendered; the phases section says it
    from workbench.analysis.run import analyze_run
    from workbench.charts import ConversationChart, run_charts
    from workbench.report.model import render_text
    from workbench.report.run_report import build_run_report

    analysis = analyze_run(store, result.run_id)
    (chart,) = [c for c in run_charts(analysis) if isinstance(c, ConversationChart)]
    assert chart.name == "ttft-vs-turn-talk"
    assert {s.variant for s in chart.series} == {"baseline", "cache"}
    assert all(s.x == (1.0, 2.0, 3.0) for s in chart.series)
    assert {r["x"] for r in chart.rows()} == {1.0, 2.0, 3.0}
    # under it, the KV cache each variant holds at the end of the turn: it grows with the history
    kv = {s.variant: s for s in chart.kv_cache}
    assert set(kv) == {"baseline", "cache"} and kv["baseline"].x == (1.0, 2.0, 3.0)
    assert kv["baseline"].mib[0] < kv["baseline"].mib[1] < kv["baseline"].mib[2]
    per_token = {v.name: v.kv_bytes_per_token for v in analysis.variants}["baseline"]
    first = next(t for t in measured if t.variant == "baseline" and t.turn == 1)
    assert kv["baseline"].mib[0] == pytest.approx(
        (first.input_tokens + first.output_tokens) * per_token / 2**20
    )
    assert all(r["kv_cache_mib"] is not None for r in chart.rows())
    text = render_text(build_run_report(analysis), detail=True)
    assert "talk (baseline): TTFT" in text and "turn 3" in text
    pytest.importorskip("PySide6")
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from workbench.gui.charts import png_bytes

    assert png_bytes(chart, scale=1.0).startswith(b"\x89PNG")
    # the window draws the two panels, TTFT over the KV cache, on one x axis
    import pyqtgraph as pg

    from workbench.gui.chartkinds import kind_of

    widget = pg.GraphicsLayoutWidget()
    kind = kind_of(chart)
    assert kind is not None
    kind.build(widget, chart)
    plots = [item for item in widget.ci.items if isinstance(item, pg.PlotItem)]
    assert len(plots) == 2 and plots[1].getAxis("left").labelText.startswith("KV cache")


def test_the_phase_sentence_names_the_crossing_turn():
    from workbench.analysis.phases import TurnPhase
    from workbench.report.phases import conversation_text

    turns = [
        TurnPhase("chat", k, ttft, 100.0, 200.0 * (k - 1)) for k, ttft in enumerate([20, 60, 110, 160], 1)
    ]
    text = conversation_text("chat", "baseline", turns)
    assert text is not None and "crosses from decode-heavy to prefill-heavy at turn 3" in text
    flat = [TurnPhase("chat", k, 10.0, 100.0, None) for k in (1, 2)]
    assert "stays decode-heavy through turn 2" in (conversation_text("chat", "b", flat) or "")
    assert conversation_text("chat", "b", flat[:1]) is None


def test_turns_held_and_their_line():
    from types import SimpleNamespace

    from workbench.analysis.targets import turns_held
    from workbench.report.phases import turn_hold_lines
    from workbench.spec.targets import Targets

    def trial(variant, turn, ttft):
        return SimpleNamespace(
            variant=variant, workload="chat", turn=turn, ttft_ms=ttft, measured=True, status="ok"
        )

    trials = [trial("baseline", k, 300.0 * k) for k in range(1, 6) for _ in range(3)]
    trials += [trial("cache", k, 300.0 + k) for k in range(1, 6) for _ in range(3)]
    targets = {"chat": Targets((("ttft_ms", 1000.0),), 90.0)}
    holds = turns_held(trials, targets, ["baseline", "cache"])
    assert [(h.variant, h.held, h.turns, h.miss_ms) for h in holds] == [
        ("baseline", 3, 5, 1200.0),
        ("cache", 5, 5, None),
    ]
    (line,) = turn_hold_lines(holds)
    assert line == (
        "chat, target TTFT ≤ 1,000 ms at p90: baseline for turns 1–3 of 5 (turn 4: 1,200 ms); cache for "
        "all 5 turns — cache holds it longest."
    )
    # no TTFT target, no line
    assert turns_held(trials, {"chat": Targets((("e2e_ms", 1.0),))}, ["baseline"]) == []
