"""Batched decoding (a variant's ``batch_size``): spec checks, plan groups, the runner's batch path
through real worker processes (fake strategy), and the baseline's real batched loop on a tiny model."""

from __future__ import annotations

import json

import pytest

from workbench.core.errors import SpecError
from workbench.run.execute import RunExecutor
from workbench.run.plan import plan_run, trial_groups
from workbench.spec.parse import parse_spec
from workbench.store import Store

CODE = '[[workloads]]\nname = "code"\nlimit = 3\nmax_new_tokens = 6\n'


def test_batch_size_is_checked():
    with pytest.raises(SpecError, match="'batch_size' must be at least 1"):
        parse_spec('[[variants]]\nname = "a"\nstrategy = "fake"\nbatch_size = 0\n' + CODE)
    with pytest.raises(SpecError, match=r"decodes one sequence at a time.*docs/levers\.md"):
        parse_spec(
            '[[variants]]\nname = "a"\nstrategy = "prompt-lookup"\nmodel = "x"\nbatch_size = 4\n' + CODE
        )


def test_batches_are_cut_from_one_workload_at_a_time():
    spec = parse_spec(
        "repetitions = 2\nwarmup = 1\n"
        '[[variants]]\nname = "a"\nstrategy = "fake"\nbatch_size = 4\n'
        + CODE
        + '[[workloads]]\nname = "chat"\nlimit = 2\nmax_new_tokens = 4\n'
    )
    (vp,) = plan_run(spec)
    groups = trial_groups(vp.trials, 1, 4)
    shapes = [(vp.trials[g[0]].workload, vp.trials[g[0]].warmup, len(g)) for g in groups]
    # code: 1 warm-up, then 6 measured trials in batches of 4 + 2; chat likewise, with a warm-up per
    # prompt-length bucket (its two turns differ in length: each prefill shape is warmed once)
    assert shapes == [
        ("code", True, 1),
        ("code", False, 4),
        ("code", False, 2),
        ("chat", True, 2),
        ("chat", False, 4),
    ]
    assert sorted(i for g in groups for i in g) == list(range(len(vp.trials)))


def test_a_batched_variant_runs_through_the_worker(db_path):
    text = (
        "repetitions = 2\nwarmup = 0\n"
        '[[variants]]\nname = "one"\nstrategy = "fake"\nprefill_ms = 20\ndecode_ms_per_token = 10\n'
        '[[variants]]\nname = "four"\nstrategy = "fake"\nprefill_ms = 20\ndecode_ms_per_token = 10\n'
        "batch_size = 4\n"
        '[[workloads]]\nname = "code"\nlimit = 4\nmax_new_tokens = 6\n'
    )
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "ok", result
    trials = store.trials(result.run_id)
    batched = [t for t in trials if t.variant == "four"]
    assert len(batched) == 8 and {t.batch_size for t in batched} == {4}
    assert len({t.concurrent_group for t in batched}) == 2  # two batches of four
    assert all(t.group_offset_ms == 0 for t in batched)
    # every request of a batch sees the batch's prefill as its TTFT, then one token per step. The fake
    # keeps a fixed schedule, so a late first token (a busy machine) shortens the gaps after it: bound
    # the last token's time (prefill + 5 steps), not TPOT.
    for t in batched:
        assert t.ttft_ms >= 19.5 and t.ttft_ms + t.decode_ms >= 69.5 and t.output_tokens == 6
    single = [t for t in trials if t.variant == "one"]
    assert {t.batch_size for t in single} == {1}
    (variant,) = [v for v in store.variants(result.run_id) if v["name"] == "four"]
    assert variant["batch_size"] == 4
    from workbench.analysis.summary import summarize

    by_name = {s.variant: s for s in summarize(trials, "one")}
    # ideal batching: four requests in the time of about one: aggregate tokens/s well above one stream's
    assert by_name["four"].throughput_tokens_per_s > 2.5 * by_name["one"].metrics["decode_tokens_per_s"].value
    # the advice knows the batched variant as the batching lever (a decode lever)
    from workbench.analysis.run import analyze_run

    (phase,) = analyze_run(store.load_run(result.run_id)).phases
    (lever,) = [lv for lv in phase.levers if lv.variant == "four"]
    assert (lever.lever, lever.targets) == ("batching", "decode")


torch = pytest.importorskip("torch")

from workbench.core.strategy import Prompt, Request  # noqa: E402
from workbench.testing.helpers import ListProbe, load_session, tiny_prompt  # noqa: E402


@pytest.mark.parametrize("strategy", ["baseline", "quantized"])
def test_the_batched_loop_matches_one_at_a_time(tiny_model_dir, strategy):
    extra = {"method": "int8-weight-only"} if strategy == "quantized" else {}
    session = load_session(tiny_model_dir, strategy, **extra)
    texts = [tiny_prompt(5), tiny_prompt(23, 4), tiny_prompt(11, 9)]  # different lengths: left padding
    budgets = [7, 12, 4]  # different budgets: some requests stop early
    requests = []
    for i, (text, n) in enumerate(zip(texts, budgets, strict=True)):
        prompt = Prompt(id=f"p{i}", prompt=text)
        requests.append(
            Request(prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=n, ignore_eos=True)
        )
    probes = [ListProbe() for _ in requests]
    outputs = session.generate_batch(requests, probes)
    for request, probe, out in zip(requests, probes, outputs, strict=True):
        alone = session.generate(request, ListProbe())
        assert probe.tokens == out.token_ids
        assert len(out.token_ids) == request.max_new_tokens
        assert out.token_ids == alone.token_ids  # greedy: padding and batching change nothing
    assert json.dumps([o.finish_reason for o in outputs]) == json.dumps(["length"] * 3)


def test_a_swept_parameter_gets_its_own_chart(db_path):
    """``sweep = {batch_size = [1, 2, 4]}``: the charts plot decode speed and TTFT against the value."""
    from workbench.analysis.run import analyze_run
    from workbench.charts import run_charts
    from workbench.charts.sweeps import ParameterSweepChart

    text = (
        "repetitions = 1\nwarmup = 0\n"
        '[[variants]]\nname = "b"\nstrategy = "fake"\nprefill_ms = 5\ndecode_ms_per_token = 4\n'
        "sweep = {batch_size = [1, 2, 4]}\n"
        '[[workloads]]\nname = "code"\nlimit = 4\nmax_new_tokens = 5\n'
    )
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "ok"
    charts = [
        c
        for c in run_charts(analyze_run(store.load_run(result.run_id)))
        if isinstance(c, ParameterSweepChart)
    ]
    assert {c.kind for c in charts} == {"decode", "ttft"}
    decode = next(c for c in charts if c.kind == "decode")
    assert decode.name == "decode-vs-batch_size-b" and decode.x_axis.label == "batch_size"
    (series,) = decode.series
    assert series.variant == "code" and series.x == (1.0, 2.0, 4.0)
    assert {r["x"] for r in decode.rows()} == {1.0, 2.0, 4.0}
