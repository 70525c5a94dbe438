"""Lossless variants checked for numerical equivalence, not assumed identical: the A/A floor, the
divergences classified at near-ties, the words, the verdict (docs/metrics.md, "Equivalence")."""

import json

import numpy as np
import pytest

from workbench.analysis.equivalence import (
    Divergence,
    Equivalence,
    Floor,
    FloorShape,
    classify_divergence,
    floor_figures,
)
from workbench.report.equivalence import equivalence_text
from workbench.spec import parse_spec
from workbench.store import Store
from workbench.testing.helpers import load_session

pytestmark = pytest.mark.usefixtures("one_thread")


def _ref_row(token, logprobs):
    """A quality_reference row: the token's log-probability and the top ids best first."""
    order = np.argsort(-np.asarray(logprobs), kind="stable")
    return {
        "token_id": token,
        "logprob": float(logprobs[token]),
        "top_ids": order.astype("<i4").tobytes(),
        "top_logprobs": np.asarray(logprobs, dtype="<f4")[order].tobytes(),
    }


def test_a_divergence_is_tie_explained_only_within_the_floors_margin():
    lp = np.log(np.array([0.40, 0.39, 0.21]))
    reference = [_ref_row(2, np.log([0.2, 0.2, 0.6])), _ref_row(0, lp)]
    assert classify_divergence(reference, [2, 0], margin=0.05) is None  # identical
    index, base, mine, gap, explained = classify_divergence(reference, [2, 1], margin=0.05)
    assert (index, base, mine) == (1, 0, 1) and gap == pytest.approx(np.log(0.40 / 0.39), rel=1e-5)
    assert explained is True
    # the same swap against a floor whose rounding moves tokens far less: unexplained
    assert classify_divergence(reference, [2, 1], margin=0.001)[4] is False
    # a clear winner swapped: unexplained at any plausible margin
    assert classify_divergence(reference, [2, 2], margin=0.05)[4] is False
    # no floor: not judged
    assert classify_divergence(reference, [2, 1], margin=None)[4] is None


def test_the_floor_figures_are_zero_for_identical_scores_and_see_a_shift():
    lb = np.log(np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1]]))
    same = floor_figures({"logprobs": lb}, {"logprobs": lb})
    assert np.all(same["kld"] == 0) and np.all(same["top_shift"] == 0)
    moved = lb.copy()
    moved[0] = np.log([0.49, 0.31, 0.2])
    shifted = floor_figures({"logprobs": lb}, {"logprobs": moved})
    assert shifted["top_shift"][0] == pytest.approx(np.log(0.31 / 0.3)) and shifted["top_shift"][1] == 0
    assert shifted["kld"][0] > 0


def _check(dtype, divergences, kld=1e-6, floor_kld=1e-6):
    floor = Floor((FloorShape("chunks of 6", 10, floor_kld, floor_kld, floor_kld, 0.02),), dtype)
    return Equivalence("spec", "chunks of 6", dtype, kld, floor, 4, tuple(divergences))


def _divergence(explained, gap=0.01):
    return Divergence("chat", "p1", 0, 3, 10, 11, gap, explained)


def test_the_status_and_its_words():
    assert _check("bfloat16", []).status == "identical"
    equivalent = _check("bfloat16", [_divergence(True), _divergence(True)], kld=1.5e-6)
    assert equivalent.status == "equivalent" and equivalent.lossless
    assert equivalence_text(equivalent) == (
        "numerically equivalent (KLD 1.5e-06, within the bf16 floor 1e-06; 2 of 2 divergences at near-ties)"
    )
    unexplained = _check("bfloat16", [_divergence(True), _divergence(False, gap=3.2)])
    assert unexplained.status == "unexplained" and not unexplained.lossless
    assert equivalence_text(unexplained).startswith("UNEXPLAINED (a bug signal): 1 of 2 divergences NOT")
    # a KLD well beyond the floor is no rounding either
    assert _check("bfloat16", [], kld=1e-3).status == "unexplained"
    # in float32 any difference is an error
    mismatch = _check("float32", [_divergence(True)])
    assert mismatch.status == "mismatch" and equivalence_text(mismatch).startswith("ERROR: output differs")


def test_shaped_scoring_is_the_same_arithmetic_in_float32_and_rounds_in_bfloat16(tiny_model_dir):
    """The verify shape and the cached-prefix shape score what one pass scores: to float32 rounding,
    and visibly differently in bfloat16 (the floor is not zero there)."""
    tokens = list(range(5, 30))
    for dtype, tolerance in (("float32", 1e-4), ("bfloat16", None)):
        session = load_session(tiny_model_dir, "baseline", dtype=dtype)
        one = np.asarray(session.score(tokens, 10).logprobs)
        for chunk, prefix in ((1, 0), (4, 0), (1, 6)):
            shaped = np.asarray(session.score_shaped(tokens, 10, chunk=chunk, prefix=prefix).logprobs)
            assert shaped.shape == one.shape
            if tolerance is not None:
                np.testing.assert_allclose(shaped, one, atol=tolerance)
        assert floor_figures({"logprobs": one}, {"logprobs": one})["kld"].max() == 0
        session.close()


_SPEC = """
name = "equivalence"
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
model = "{m}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "speculative"
strategy = "speculative"
model = "{m}"
draft = "{m}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "lookup"
strategy = "prompt-lookup"
model = "{m}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "prefix"
strategy = "prefix-cache"
min_prefix_tokens = 2
model = "{m}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "int4"
strategy = "quantized"
method = "int4-weight-only"
group_size = 32
model = "{m}"
dtype = "{dtype}"
device = "cpu"
[[workloads]]
name = "chat"
max_new_tokens = 16
ignore_eos = true
prompts = ["w1 w2 w3 w4 w5 w6 the a of w1 w2", "w1 w2 w3 w4 w5 w6 the a of w1 w2 w7 w8 and w9",
           "w3 w4 the w5 of w6 the w3 w4 the"]
"""


def _equivalence_run(model, dtype, folder):
    from workbench.analysis.run import analyze_run
    from workbench.run.execute import RunExecutor

    db = folder / f"{dtype}.db"
    with Store(db) as store:
        result = RunExecutor(parse_spec(_SPEC.format(m=model, dtype=dtype)), store).run()
        assert result.status == "ok", result.errors
        return db, analyze_run(store, result.run_id), store.quality_variants(result.run_id)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_run_checks_its_lossless_variants_against_the_floor(tiny_model_dir, tmp_path, dtype):
    """The issue's run on a tiny random model: baseline, speculative, prompt lookup, prefix cache and
    int4, in bfloat16 (the lossless ones equivalent within the floor, every divergence classified, int4
    outside it) and in float32 (the lossless ones identical)."""
    pytest.importorskip("torchao")
    db, analysis, rows = _equivalence_run(tiny_model_dir, dtype, tmp_path)
    shapes = {r["variant"]: r["shape"] for r in rows}
    assert shapes["speculative"].startswith("chunks of") and shapes["lookup"].startswith("chunks of")
    assert shapes["prefix"] == "cached prefix, one token per pass"
    checked = analysis.equivalence
    assert checked is not None and checked.floor is not None
    assert set(checked.variants) == {"speculative", "lookup", "prefix"}
    floor = checked.floor
    assert {s.shape for s in floor.shapes} == {"one token per pass", *shapes.values()} - {None}
    for check in checked.variants.values():
        assert check.outputs == 3 and check.kld is not None
        assert check.within_floor, (check.variant, check.kld, floor.kld)
        assert all(d.explained is not None for d in check.divergences)
    int4 = next(f for f in analysis.quality.figures if f.variant == "int4" and f.source == "output")
    assert not floor.within(int4.kld_mean)  # weights rounded to 4 bits: far outside the arithmetic's floor
    if dtype == "float32":
        assert all(c.status == "identical" for c in checked.variants.values())
        assert floor.kld < 1e-8
    else:
        assert floor.kld > 0  # bf16 rounds the shapes differently
        assert all(c.status in ("identical", "equivalent") for c in checked.variants.values()), [
            equivalence_text(c) for c in checked.variants.values()
        ]
    from click.testing import CliRunner

    from workbench.cli import cli

    shown = CliRunner().invoke(cli, ["show", "1", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "Numerical floor (" in shown.output and "outside the numerical floor" in shown.output
    for verdict in analysis.workload_verdicts:  # an equivalent variant's cost is not "output differs"
        check = checked.variants.get(verdict.best.variant) if verdict.best is not None else None
        if check is not None and check.status == "equivalent":
            assert "output" not in verdict.costs and verdict.costs["equivalence"] is check
    data = json.loads(CliRunner().invoke(cli, ["show", "1", "--db", str(db), "--json"]).output)
    assert set(data["equivalence"]["variants"]) == {"speculative", "lookup", "prefix"}


def test_the_pass_runs_for_lossless_levers_alone_when_their_arithmetic_can_differ():
    from workbench.run.quality import equivalence_shapes, quality_wanted

    def spec(dtype, device, strategy="prompt-lookup"):
        return parse_spec(
            f'[[variants]]\nname = "baseline"\nmodel = "demo:smollm2-135m"\ndtype = "{dtype}"\ndevice = "{device}"\n'
            f'[[variants]]\nname = "v"\nstrategy = "{strategy}"\nmodel = "demo:smollm2-135m"\n'
            f'dtype = "{dtype}"\ndevice = "{device}"\n[[workloads]]\nname = "chat"\n'
        )

    assert equivalence_shapes(spec("bfloat16", "cpu"))["v"].chunk == 11  # num_tokens 10 + 1
    assert quality_wanted(spec("bfloat16", "cpu"))
    assert quality_wanted(spec("auto", "auto"))  # auto may be a GPU's bfloat16
    assert not quality_wanted(spec("float32", "cpu"))
    assert not quality_wanted(spec("auto", "cpu"))
    assert not quality_wanted(spec("bfloat16", "cpu", "baseline"))  # a copy: the same passes
