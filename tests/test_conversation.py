"""Conversation workloads: the file format and its errors, the built-in set, and a real run through
worker processes where the baseline anchors the history and every variant gets identical prompts."""

from __future__ import annotations

import json

import pytest

from workbench.core.errors import SpecError
from workbench.formatting import meaningful
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


def test_the_parsed_workload_keeps_its_kind_and_says_whether_it_is_a_conversation(tmp_path):
    """``kind`` is kept on the parsed workload (typed, not checked and dropped), from a file or the
    built-in set alike; everything else is ``prompts``, sweeps keep their ``sweep``."""
    from workbench.store import TrialRecord

    path = conversations_file(tmp_path, [{"id": "c1", "turns": ["hi", "more"]}])
    (talk,) = spec_with(path).workloads
    assert talk.kind == "conversation" and talk.is_conversation and talk.history == "baseline-anchored"
    spec = parse_spec(
        VARIANT + '[[workloads]]\nname = "conversation"\n[[workloads]]\nname = "chat"\n'
        '[[workloads]]\nname = "sweep-output"\n[[workloads]]\nname = "inline"\nkind = "prompts"\n'
        'prompts = ["hello"]\n'
    )
    kinds = {w.name: (w.kind, w.is_conversation, w.sweep) for w in spec.workloads}
    assert kinds == {
        "conversation": ("conversation", True, None),
        "chat": ("prompts", False, None),
        "sweep-output": ("prompts", False, "output"),
        "inline": ("prompts", False, None),
    }
    # a stored trial says the same of itself: a conversation's turn carries its number
    assert TrialRecord(turn=2).in_conversation and not TrialRecord().in_conversation


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

    analysis = analyze_run(store.load_run(result.run_id))
    (chart,) = [c for c in run_charts(analysis) if isinstance(c, ConversationChart)]
    assert chart.name == "ttft-vs-turn-talk"
    assert {s.variant for s in chart.series} == {"baseline", "cache"}
    assert all(s.x == (1.0, 2.0, 3.0) for s in chart.series)
    assert {r["x"] for r in chart.rows()} == {1.0, 2.0, 3.0}
    # under it, the KV cache each variant's session held at the end of the turn, as it reported it
    kv = {s.variant: s for s in chart.kv_cache}
    assert set(kv) == {"baseline", "cache"} and kv["baseline"].x == (1.0, 2.0, 3.0)
    assert kv["baseline"].mib[0] < kv["baseline"].mib[1] < kv["baseline"].mib[2]
    per_token = {v.name: v.kv_bytes_per_token for v in analysis.variants}["baseline"]
    for t in measured:  # the baseline holds its prompt and its answer (the last token is never fed back)
        if t.variant == "baseline":
            assert t.kv_held_tokens == t.input_tokens + t.output_tokens - 1
            assert t.kv_held_bytes == pytest.approx(t.kv_held_tokens * per_token)
    # the prefix cache holds that and the copies of every earlier prompt it keeps: more from turn 2 on
    for k in (1, 2):
        assert kv["cache"].tokens[k] > kv["baseline"].tokens[k] and kv["cache"].mib[k] > kv["baseline"].mib[k]
    assert kv["cache"].tokens[0] == kv["baseline"].tokens[0]
    assert all(r["kv_held_mib"] is not None and r["history_tokens"] is not None for r in chart.rows())
    # the chart's figures are the analysis's, and so are the JSON's and the sentence's
    series = analysis.turns("talk", "baseline")
    assert series is not None and chart.series[0].y == tuple(p.ttft.value for p in series.points)
    from workbench.report.data import run_data

    data = run_data(analysis)
    (talk,) = [s for s in data["conversations"] if s["variant"] == "baseline"]
    assert [p["ttft_ms"]["value"] for p in talk["turns"]] == meaningful(
        list(chart.series[0].y)
    )  # JSON: 6 digits
    assert [p["kv_held_tokens"] for p in talk["turns"]] == list(kv["baseline"].tokens)
    text = render_text(build_run_report(analysis), detail=True)
    assert "talk (baseline): TTFT" in text and "turn 3" in text
    assert " ".join(data["conversation_advice"][0].split()) in " ".join(text.split())
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
    assert len(plots) == 2 and plots[1].getAxis("left").labelText.startswith("KV held")
    # a tick per turn, whole numbers only, with the history's tokens under it
    ticks = [value for value, _ in plots[1].getAxis("bottom")._tickLevels[0]]
    assert ticks == [1.0, 2.0, 3.0]


def _trial(variant, turn, ttft, *, decode=100.0, history=None, kv=None, disturbed=0, workload="chat"):
    from workbench.store import TrialRecord

    return TrialRecord(
        run_id=1,
        variant=variant,
        strategy="fake",
        model="m",
        workload=workload,
        prompt_id=f"c/t{turn:02d}",
        repetition=0,
        warmup=False,
        status="ok",
        turn=turn,
        ttft_ms=ttft,
        decode_ms=decode,
        history_tokens=history,
        kv_held_tokens=kv,
        kv_held_bytes=None if kv is None else kv * 1024,
        disturbed=disturbed,
    )


def test_the_phase_sentence_names_the_crossing_turn():
    from workbench.analysis.turns import conversation_series
    from workbench.report.phases import conversation_text

    trials = [
        _trial("baseline", k, ttft, history=200.0 * (k - 1)) for k, ttft in enumerate([20, 60, 110, 160], 1)
    ]
    (series,) = conversation_series(trials)
    assert series.crossing == 3
    text = conversation_text(series)
    assert text is not None and "crosses from decode-heavy to prefill-heavy at turn 3" in text
    (flat,) = conversation_series([_trial("b", k, 10.0) for k in (1, 2)])
    assert "stays decode-heavy through turn 2" in (conversation_text(flat) or "")
    (one,) = conversation_series([_trial("b", 1, 10.0)])
    assert conversation_text(one) is None


def test_turns_held_and_their_line():
    from workbench.analysis.targets import turns_held
    from workbench.analysis.turns import conversation_series
    from workbench.report.phases import turn_hold_lines
    from workbench.spec.targets import Targets

    trials = [_trial("baseline", k, 300.0 * k) for k in range(1, 6) for _ in range(3)]
    trials += [_trial("cache", k, 300.0 + k) for k in range(1, 6) for _ in range(3)]
    series = conversation_series(trials, ["baseline", "cache"])
    targets = {"chat": Targets((("ttft_ms", 1000.0),), 90.0)}
    holds = turns_held(series, targets)
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
    assert turns_held(series, {"chat": Targets((("e2e_ms", 1.0),))}) == []


def _sample_copy(tmp_path):
    import shutil
    from pathlib import Path

    db = tmp_path / "demo.db"
    shutil.copy(Path(__file__).parents[1] / "resources/sample/demo.db", db)
    return db


def test_every_view_reads_one_set_of_turn_figures_without_the_disturbed_trial(tmp_path):
    """A trial the run flagged disturbed (and the tables leave out) is out of the chart, the sentence,
    the JSON and the turn-hold line alike: a 5 s outlier at turn 3 sets no y-scale."""
    import sqlite3

    from workbench.analysis.run import analyze_run
    from workbench.charts import ConversationChart, run_charts
    from workbench.report.data import run_data
    from workbench.store import Store

    db = _sample_copy(tmp_path)
    with sqlite3.connect(db) as conn:
        (trial_id,) = conn.execute(
            "select id from trials where workload = 'conversation' and variant = 'baseline' and turn = 3 "
            "and warmup = 0 order by id limit 1"
        ).fetchone()
        conn.execute(
            "update trials set ttft_ms = 5000, disturbed = 1, disturbance = 'test' where id = ?", (trial_id,)
        )
    store = Store(db)
    analysis = analyze_run(store.load_run(None))
    assert analysis.design.disturbance.excluded  # the tables leave it out
    series = analysis.turns("conversation", "baseline")
    assert series is not None
    third = next(p for p in series.points if p.turn == 3)
    assert third.n == 2 and max(third.ttfts) < 5000
    (chart,) = [c for c in run_charts(analysis) if isinstance(c, ConversationChart)]
    baseline = next(s for s in chart.series if s.variant == "baseline")
    assert max(h for h in baseline.hi if h is not None) < 5000
    assert baseline.y == tuple(p.ttft.value for p in series.points)
    data = run_data(analysis)
    (row,) = [s for s in data["conversations"] if s["variant"] == "baseline"]
    assert row["turns"][2]["n"] == 2 and row["turns"][2]["ttft_ms"] == meaningful(third.ttft.to_dict())
    assert row["crossing_turn"] == series.crossing
    # kept in, it is everywhere at once
    kept = analyze_run(store.load_run(None), exclude_disturbed=False)
    again = kept.turns("conversation", "baseline")
    assert again is not None and max(next(p for p in again.points if p.turn == 3).ttfts) == 5000


def test_a_runtime_that_cannot_tell_its_kv_has_no_line_and_says_so():
    from types import SimpleNamespace

    from workbench.analysis.turns import conversation_series
    from workbench.charts.conversation import conversation_charts

    trials = [_trial("baseline", k, 100.0 * k, history=50.0 * k, kv=100 * k) for k in (1, 2, 3)]
    trials += [_trial("llama", k, 80.0 * k, history=50.0 * k) for k in (1, 2, 3)]
    series = conversation_series(trials, ["baseline", "llama"])
    (chart,) = conversation_charts(SimpleNamespace(conversations=series, variant_names=["baseline", "llama"]))
    assert [k.variant for k in chart.kv_cache] == ["baseline"]  # no zero line for llama
    assert chart.kv_unknown == ("llama",)
    assert any("No KV figure for llama" in n and "not a zero" in n for n in chart.notes)
    assert {r["kv_held_tokens"] for r in chart.rows() if r["variant"] == "llama"} == {None}
    assert [label for _, label in chart.turn_labels] == ["1\n50 tok", "2\n100 tok", "3\n150 tok"]


def test_anchored_turns_get_warm_ups_of_their_own_length(tmp_path):
    """Before anchoring a turn is its own short message, so every turn falls in the first turn's
    length bucket; anchored, the later turns carry the history and get a warm-up of their length."""
    from workbench.core.strategy import Prompt
    from workbench.run.plan import anchor_plans, length_bucket
    from workbench.spec.workloads import turn_messages

    path = conversations_file(tmp_path, [{"id": "c1", "turns": ["a", "b", "c"]}])
    spec = spec_with(path, "max_new_tokens = 64\n")
    (plan,) = plan_run(spec)
    assert [t.prompt.id for t in plan.trials if t.warmup] == ["c1/t01"]  # one bucket before anchoring
    conversation = spec.workloads[0].conversations[0]
    answers = ["word " * 60, "word " * 120]
    prompts = {
        ("talk", f"c1/t{k:02d}"): (
            Prompt(id=f"c1/t{k:02d}", messages=turn_messages(conversation, k, answers)),
            100 * (k - 1),
        )
        for k in range(1, 4)
    }
    (anchored,) = anchor_plans([plan], prompts, warmup_max_new_tokens=2)
    warm = [t for t in anchored.trials if t.warmup]
    buckets = [length_bucket(p) for p, _ in prompts.values()]
    assert len(set(buckets)) == 3  # the test's premise: three lengths, three buckets
    assert [t.prompt.id for t in warm] == ["c1/t01", "c1/t02", "c1/t03"]
    assert all(t.prompt == prompts[("talk", t.prompt.id)][0] for t in warm)  # the anchored prompts
    assert [t.max_new_tokens for t in warm[1:]] == [2, 2] and all(t.round is None for t in warm)
    # the measured trials are untouched, and come after every warm-up
    assert [t for t in anchored.trials if not t.warmup] == [
        t for t in anchor_plans([plan], prompts)[0].trials if not t.warmup
    ]
    assert anchored.trials[: len(warm)] == tuple(warm)


def _second_run(db):
    """The sample's run copied as run 2 (same variants and trials): two runs to compare."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row

        def copy(table, where, **changes):
            for row in conn.execute(f"select * from {table} where {where}").fetchall():
                # a Row iterates its values: its column names are keys()
                values = {k: row[k] for k in row.keys() if k != "id"} | changes  # noqa: SIM118
                names = ", ".join(f"[{k}]" for k in values)
                conn.execute(
                    f"insert into {table} ({names}) values ({', '.join('?' * len(values))})",
                    list(values.values()),
                )

        copy("runs", "id = 1")
        (run_b,) = conn.execute("select max(id) from runs").fetchone()
        copy("variants", "run_id = 1", run_id=run_b)
        copy("trials", "run_id = 1", run_id=run_b)
    return run_b


def test_the_compare_view_overlays_both_runs_turns(tmp_path):
    pytest.importorskip("PySide6")
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from workbench.charts import ConversationChart
    from workbench.gui.charts import png_bytes
    from workbench.gui.loading import load_results

    db = _sample_copy(tmp_path)
    run_b = _second_run(db)
    data = load_results(db, (1, run_b))
    (chart,) = [c for c in data.charts if isinstance(c, ConversationChart)]
    names = [s.variant for s in chart.series]
    assert names == ["1:baseline", "1:prefix-cache", f"{run_b}:baseline", f"{run_b}:prefix-cache"]
    assert chart.before == ("1:baseline", "1:prefix-cache")
    assert chart.colours["1:baseline"] == chart.colours[f"{run_b}:baseline"]  # one colour per variant
    assert chart.series[0].y == chart.series[2].y  # the same trials, the same figures
    assert all(s.slope is None for s in chart.series)  # no fit lines among the dashed ones
    assert png_bytes(chart, scale=1.0).startswith(b"\x89PNG")


def test_ttft_vs_input_is_one_line_per_workload_and_variant(tmp_path):
    """Without a sweep workload, TTFT vs input length draws every workload: one line per workload ×
    variant (a conversation's turns are not fitted with a report's prompt), every variant that ran it."""
    from workbench.analysis.run import analyze_run
    from workbench.analysis.stats import fit_line
    from workbench.charts import run_charts
    from workbench.store import Store

    analysis = analyze_run(Store(_sample_copy(tmp_path)).load_run(None))
    chart = next(c for c in run_charts(analysis) if c.name == "ttft-vs-input")
    assert chart.source == "all workloads"
    ran = {(t.workload, t.variant) for t in analysis.trials if t.measured}
    assert {(s.workload, s.variant) for s in chart.series} == ran  # int4-ort & co. at one length too
    line = next(s for s in chart.series if (s.workload, s.variant) == ("conversation", "baseline"))
    own = [
        t for t in analysis.trials if (t.workload, t.variant) == ("conversation", "baseline") and t.measured
    ]
    fit = fit_line([t.input_tokens for t in own], [t.ttft_ms for t in own])  # its own points only
    assert (line.slope, line.intercept) == pytest.approx(fit, rel=1e-9)
    single = next(s for s in chart.series if s.variant == "int4-ort")
    assert len(single.x) == 1 and single.slope is None and single.label == "int4-ort · summarise-short"
    assert {r["workload"] for r in chart.rows()} == {"conversation", "summarise-short"}


def test_each_strategy_reports_the_kv_its_session_holds(tiny_model_dir):
    """The baseline holds its prompt and answer; the prefix cache that and a copy of every earlier
    prompt; prompt lookup only the target's cache; a draft model's cache is added to the target's."""
    pytest.importorskip("torch")
    from workbench.core.strategy import Prompt, Request
    from workbench.testing.helpers import ListProbe, load_session, tiny_prompt

    turns = [tiny_prompt(20, 0)]
    turns.append(turns[-1] + " " + tiny_prompt(10, 40))

    def ask(session, text, prompt_id):
        prompt = Prompt(id=prompt_id, prompt=text)
        request = Request(
            prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=6, ignore_eos=True
        )
        return request, session.generate(request, ListProbe())

    held = {}
    for name, params in (
        ("baseline", {}),
        ("prefix-cache", {"min_prefix_tokens": 4}),
        ("prompt-lookup", {}),
        ("speculative", {"draft": str(tiny_model_dir), "num_draft_tokens": 2, "adaptive": False}),
    ):
        session = load_session(tiny_model_dir, name, **params)
        held[name] = [ask(session, text, f"t{i}") for i, text in enumerate(turns)]
        session.close()
    per_token = None
    for request, out in held["baseline"]:
        assert out.kv_held_tokens == len(request.input_ids) + len(out.token_ids) - 1
        per_token = out.kv_held_bytes / out.kv_held_tokens
    first_prompt = len(held["baseline"][0][0].input_ids)
    (_, one), (_, two) = held["prefix-cache"]
    assert one.kv_held_tokens == held["baseline"][0][1].kv_held_tokens
    # turn 2: its own cache and the kept copy of turn 1's prompt (whose storage held turn 1's answer too)
    assert two.kv_held_tokens == held["baseline"][1][1].kv_held_tokens + first_prompt
    assert two.kv_held_bytes >= two.kv_held_tokens * per_token
    for (_, lookup), (_, base) in zip(held["prompt-lookup"], held["baseline"], strict=True):
        assert lookup.kv_held_tokens is not None and lookup.kv_held_tokens >= base.kv_held_tokens - 1
    for (_, spec), (_, base) in zip(held["speculative"], held["baseline"], strict=True):
        assert (
            spec.kv_held_bytes is not None and spec.kv_held_bytes > base.kv_held_bytes
        )  # two models' caches
