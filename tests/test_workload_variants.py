"""A workload's ``variants`` key: which variants run it. Parsing and its one-line errors, the plan
(left-out workloads, rounds that still pair), and a real run where a conversation runs on the
baseline and a prefix cache only, while a bf16 variant is scored on the workloads it ran."""

from __future__ import annotations

import json

import pytest

from workbench.core.errors import SpecError
from workbench.run.plan import plan_run
from workbench.spec.parse import parse_spec

VARIANTS = (
    '[[variants]]\nname = "baseline"\nstrategy = "fake"\n'
    '[[variants]]\nname = "cache"\nstrategy = "fake"\n'
    '[[variants]]\nname = "spec"\nstrategy = "fake"\nsweep = {decode_ms_per_token = [1, 2]}\n'
)


def spec(workloads: str, variants: str = VARIANTS):
    return parse_spec("repetitions = 2\n" + variants + workloads)


def test_a_workload_runs_the_variants_it_lists_and_a_sweep_by_its_name():
    s = spec(
        '[[workloads]]\nname = "code"\nvariants = ["baseline", "spec"]\n'
        '[[workloads]]\nname = "rag"\nlimit = 1\n'
    )
    code, rag = s.workloads
    assert code.variants == ("baseline", "spec decode_ms_per_token=1", "spec decode_ms_per_token=2")
    assert rag.variants is None and rag.runs("cache")
    assert code.runs("spec decode_ms_per_token=2") and not code.runs("cache")
    plans = {p.variant.name: p for p in plan_run(s)}
    assert {t.workload for t in plans["cache"].trials} == {"rag"}
    assert {t.workload for t in plans["spec decode_ms_per_token=1"].trials} == {"code", "rag"}
    # the rounds keep their numbers: the same (round, prompt) in every plan that has it
    rounds = {(t.round, t.prompt.id) for t in plans["baseline"].trials if not t.warmup}
    assert {(t.round, t.prompt.id) for t in plans["cache"].trials if not t.warmup} < rounds


@pytest.mark.parametrize(
    ("workloads", "problem"),
    [
        ('name = "code"\nvariants = []\n', "non-empty list of variant names"),
        ('name = "code"\nvariants = [1]\n', "non-empty list of variant names"),
        (
            'name = "code"\nvariants = ["cahce"]\n',
            "'cahce', which is not a variant \\(did you mean 'cache'\\?\\)",
        ),
        ('name = "code"\nvariants = ["cache", "spec"]\n', "must list the baseline \\('baseline'\\)"),
        ('name = "code"\nvariants = ["baseline", "spec"]\n', "variant 'cache' runs no workload"),
    ],
)
def test_bad_variants_keys_are_refused_in_one_line(workloads, problem):
    with pytest.raises(SpecError, match=problem) as caught:
        spec("[[workloads]]\n" + workloads)
    assert "\n" not in str(caught.value)


def test_a_single_name_is_a_list_of_one():
    s = parse_spec(
        '[[variants]]\nname = "a"\nstrategy = "fake"\n[[workloads]]\nname = "code"\nvariants = "a"\n'
    )
    assert s.workloads[0].variants == ("a",)


# -- a real run ---------------------------------------------------------------------------------------


def test_a_run_with_a_conversation_for_two_of_its_variants(tmp_path, tiny_model_dir, db_path):
    pytest.importorskip("torch")
    from workbench.analysis.run import analyze_run
    from workbench.report.model import render_text
    from workbench.report.run_report import build_run_report
    from workbench.run.execute import RunExecutor
    from workbench.store import Store
    from workbench.testing.helpers import tiny_prompt

    chats = tmp_path / "chats.jsonl"
    turns = [tiny_prompt(8, 10 * k) for k in range(3)]
    chats.write_text(json.dumps({"id": "c1", "system": tiny_prompt(6, 3), "turns": turns}) + "\n")
    m = tiny_model_dir
    text = (
        "repetitions = 2\nwarmup = 1\n"
        f'[[variants]]\nname = "baseline"\nmodel = "{m}"\nthreads = 1\ndtype = "float32"\n'
        f'[[variants]]\nname = "cache"\nstrategy = "prefix-cache"\nmodel = "{m}"\nthreads = 1\n'
        'dtype = "float32"\nmin_prefix_tokens = 2\n'
        f'[[variants]]\nname = "bf16"\nmodel = "{m}"\nthreads = 1\ndtype = "bfloat16"\n'
        f'[[workloads]]\nname = "talk"\nkind = "conversation"\nfile = "{chats}"\nmax_new_tokens = 6\n'
        'variants = ["baseline", "cache"]\n'
        f'[[workloads]]\nname = "short"\nprompts = ["{tiny_prompt(10, 1)}", "{tiny_prompt(12, 2)}"]\n'
        'max_new_tokens = 6\nvariants = ["baseline", "bf16"]\n'
    )
    store = Store(db_path)
    result = RunExecutor(parse_spec(text), store).run()
    assert result.status == "ok", result
    measured = [t for t in store.trials(result.run_id) if not t.warmup]
    ran = {(t.variant, t.workload) for t in measured}
    assert ran == {("baseline", "talk"), ("cache", "talk"), ("baseline", "short"), ("bf16", "short")}
    assert all(t.status == "ok" for t in store.trials(result.run_id))
    # each variant is scored or checked on the baseline's outputs of the workloads it ran
    quality = {
        q["variant"]: q for q in store.db["quality_variants"].rows_where("run_id = ?", [result.run_id])
    }
    assert quality["bf16"]["status"] == "scored", quality["bf16"]
    assert quality["cache"]["status"] == "lossless" and quality["cache"]["positions"], quality["cache"]
    positions = list(store.db["quality_positions"].rows_where("run_id = ?", [result.run_id]))
    assert {p["workload"] for p in positions if p["variant"] == "bf16"} == {"short"}
    judged = store.equivalence_positions(result.run_id)
    assert {p["workload"] for p in judged if p["variant"] == "cache"} == {"talk"}
    # the analysis pairs each variant on the workloads it ran, and the report renders
    analysis = analyze_run(store.load_run(result.run_id))
    text = render_text(build_run_report(analysis), detail=True)
    assert "talk (baseline): TTFT" in text
    assert "not scored" not in text
