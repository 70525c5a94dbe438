"""Lossless variants checked for numerical equivalence, not assumed identical (docs/metrics.md,
"Equivalence"): each replayed through its own code path with a trace, every position judged on its own
tokens against that position's own floor and on its own logits; planted faults caught in real runs;
the old check's figures still read for old runs."""

import dataclasses
import json
import os

import numpy as np
import pytest

from workbench.analysis.equivalence import (
    Divergence,
    Equivalence,
    Floor,
    FloorShape,
    Judged,
    classify_divergence,
    floor_figures,
    judge_positions,
)
from workbench.report.equivalence import equivalence_text
from workbench.spec import parse_spec
from workbench.store import Store
from workbench.store.loaded import ReferenceRecord
from workbench.testing.helpers import load_session

pytestmark = pytest.mark.usefixtures("one_thread")


def _ref_row(token, logprobs):
    """A quality_reference row: the token's log-probability and the top ids best first."""
    order = np.argsort(-np.asarray(logprobs), kind="stable")
    return ReferenceRecord(
        workload="w",
        prompt_id="p",
        position=0,
        token_id=token,
        logprob=float(logprobs[token]),
        top_ids=order.astype("<i4").tobytes(),
        top_logprobs=np.asarray(logprobs, dtype="<f4")[order].tobytes(),
    )


def test_old_runs_a_divergence_is_tie_explained_only_within_the_floors_margin():
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


def test_old_runs_the_status_and_its_words():
    assert _check("bfloat16", []).status == "identical"
    equivalent = _check("bfloat16", [_divergence(True), _divergence(True)], kld=1.5e-6)
    assert equivalent.status == "equivalent" and equivalent.lossless
    assert equivalence_text(equivalent) == (
        "numerically equivalent (KLD 1.5e-06, within the bf16 floor 1e-06; 2 of 2 divergences at near-ties)"
        " [checked the old way]"
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


def _lp(*probs):
    p = np.asarray(probs, dtype=np.float64)
    return np.log(p / p.sum())


def test_each_position_is_judged_against_its_own_floor_not_a_run_wide_one():
    """Position 0: the baseline's argmax. Position 1: a swap of two tokens 0.025 nats apart, which
    the variant's passes moved by 0.02 each (gap ≤ 2 × shift): a near-tie. Position 2: the same swap
    where the passes moved nothing: unexplained, though position 1's floor would have covered it."""
    ref = np.stack([_lp(0.7, 0.2, 0.1), _lp(0.41, 0.40, 0.19), _lp(0.41, 0.40, 0.19)])
    shaped = ref.copy()
    shaped[1, 0] -= 0.02
    shaped[1, 1] += 0.02
    got = judge_positions([0, 1, 1], ref, shaped)
    assert list(got["verdict"]) == ["argmax", "near-tie", "unexplained"]
    assert got["gap"][0] == 0 and got["gap"][1] == pytest.approx(np.log(0.41 / 0.40))
    assert got["floor_shift"][1] == pytest.approx(0.02) and got["floor_shift"][2] == 0
    assert list(got["base_top"]) == [0, 0, 0] and got["floor_kld"][0] == 0 and got["floor_kld"][1] > 0
    # the near-tie rule's edge: a gap of exactly twice the shift is explained, a hair more is not
    # an output whose passes were not recorded: each position's floor is the largest of the shapes
    # that may have run
    either = judge_positions([0, 1, 1], ref, [ref, shaped])
    assert list(either["verdict"]) == ["argmax", "near-tie", "unexplained"]
    assert either["floor_shift"][1] == pytest.approx(0.02)
    moved = np.array([[-0.02, 0.02, 0.0]])
    for gap, verdict in ((0.04, "near-tie"), (0.04 + 1e-6, "unexplained")):
        edge = np.array([[-1.0, -1.0 - gap, -3.0]])
        assert judge_positions([1], edge, edge + moved)["verdict"][0] == verdict


def test_a_token_that_is_not_its_own_passs_argmax_is_caught_whatever_the_baseline_says():
    """A greedy decoder must emit the argmax of its own pass: a token accepted within a tolerance
    is caught even where the baseline's floor would call it a near-tie; an exact tie is no fault."""
    ref = np.stack([_lp(0.41, 0.40, 0.19), _lp(0.5, 0.3, 0.2)])
    shaped = ref.copy()
    shaped[0, 0] -= 0.02
    shaped[0, 1] += 0.02
    own = shaped.copy()
    own[0] = _lp(0.45, 0.36, 0.19)  # its own pass prefers token 0; it emitted token 1
    got = judge_positions([1, 0], ref, shaped, own)
    assert list(got["verdict"]) == ["not-own-argmax", "argmax"]
    assert got["own_gap"][0] == pytest.approx(np.log(0.45 / 0.36)) and got["own_gap"][1] == 0
    assert got["own_shift"][1] == 0 and got["own_kld"][1] == 0 and got["own_kld"][0] > 0
    tie = np.stack([_lp(0.4, 0.4, 0.2)])
    assert judge_positions([1], tie, tie, tie)["verdict"][0] == "near-tie"  # gap 0 <= 2 * 0


def _judged(**figures):
    base = dict(
        prompts=2,
        outputs=2,
        positions=40,
        near_ties=0,
        unexplained=0,
        not_own_argmax=0,
        not_argmax=0,
        own_kld=0.0,
        floor_kld=1e-6,
        widest_gap=None,
    )
    return Judged(**{**base, **figures})


def _replayed(dtype, differ=True, **figures):
    divergences = (_divergence(None),) if differ else ()
    return Equivalence("spec", "replayed", dtype, 0.0, None, 2, divergences, judged=_judged(**figures))


def test_the_replays_status_and_its_words():
    identical = _replayed("bfloat16")
    assert identical.status == "identical" and identical.lossless
    text = equivalence_text(identical)
    assert text.startswith("identical: its outputs are the baseline's, every token the baseline's argmax (40")
    assert "own tokens, each against its own floor" in text and "its own logits' KLD 0" in text
    equivalent = _replayed("bfloat16", near_ties=2, not_argmax=2)
    assert equivalent.status == "equivalent" and equivalent.lossless
    assert equivalence_text(equivalent).startswith(
        "numerically equivalent: 1 of 2 outputs differ from the baseline's, 2 of 40 positions at near-ties"
    )
    # the same near-ties where its outputs are the baseline's: the baseline's own decoding took them too
    same = _replayed("bfloat16", differ=False, near_ties=2, not_argmax=2)
    assert same.status == "identical" and "2 at near-ties the baseline's own decoding took too" in (
        equivalence_text(same)
    )
    for fault in (dict(unexplained=1, widest_gap=0.9), dict(not_own_argmax=1), dict(own_kld=5e-6)):
        check = _replayed("bfloat16", near_ties=3, **fault)
        assert check.status == "unexplained" and not check.lossless, fault
        assert equivalence_text(check).startswith("UNEXPLAINED (a bug signal): ")
    assert "NOT the argmax of its own pass" in equivalence_text(_replayed("bfloat16", not_own_argmax=1))
    assert _replayed("bfloat16", own_kld=4e-6).status == "identical"  # 4x the floor: still arithmetic
    mismatch = _replayed("float32", near_ties=1, not_argmax=1)
    assert mismatch.status == "mismatch" and equivalence_text(mismatch).startswith("ERROR: output differs")
    # nothing replayed (a session that cannot trace), or a prompt left out: never equivalent
    untraced = _replayed("bfloat16", positions=0, prompts=0, outputs=0, own_kld=None, unchecked=("no trace",))
    assert untraced.status == "unchecked" and equivalence_text(untraced) == (
        "not checked (no trace): its equivalence is not claimed"
    )
    partly = _replayed("bfloat16", unchecked=("chat/p3 not replayed: it failed",))
    assert partly.status == "unchecked" and "not checked: chat/p3 not replayed" in equivalence_text(partly)


def test_the_trace_records_the_passes_and_the_baseline_replays_them_exactly(tiny_model_dir, tmp_path):
    """The speculative loop (a draft that is not the target: drafts get rejected), prompt lookup, the
    prefix cache and plain decoding report every pass of the target and each emitted token's row;
    the baseline, through those passes, computes the variant's own log-probabilities bit for bit (the
    same arithmetic), and a timed trial's probe carries no trace."""
    from workbench.run.runner import _Probe
    from workbench.run.untimed import ReplayProbe
    from workbench.testing.helpers import build_tiny_model, request_for

    assert _Probe.trace is None
    draft = build_tiny_model(tmp_path / "draft", seed=1)
    base = load_session(tiny_model_dir, "baseline", dtype="bfloat16")
    # the third prompt extends the second, which extended the first: the prefix cache reuses an entry
    # that was itself built on a reused prefix, and its trace says through which passes (``built``)
    texts = [
        "w1 w2 w3 w4 w5 w6 the a of w1 w2",
        "w1 w2 w3 w4 w5 w6 the a of w1 w2 w7 w8 and w9",
        "w1 w2 w3 w4 w5 w6 the a of w1 w2 w7 w8 and w9 of the w3 w4 w5 a",
    ]
    for strategy, params in (
        ("speculative", {"draft": str(draft)}),
        ("prompt-lookup", {}),
        ("prefix-cache", {"min_prefix_tokens": 2}),
        ("baseline", {}),
    ):
        session = load_session(tiny_model_dir, strategy, dtype="bfloat16", **params)
        verified = rejected = cached = 0
        for n, text in enumerate(texts):
            request = request_for(session, text, max_new_tokens=16, ignore_eos=True)
            request = dataclasses.replace(request, prompt=dataclasses.replace(request.prompt, id=f"p{n}"))
            probe = ReplayProbe(lambda: False)
            output = session.generate(request, probe)
            trace = probe.trace
            assert trace.tokens == output.token_ids == probe.tokens and len(trace.rows) == 16
            prompt = list(request.input_ids)
            own = np.stack(trace.rows)
            assert (own.argmax(axis=1) == np.asarray(output.token_ids)).all()
            shaped = base.score_passes(
                prompt + output.token_ids, len(prompt), trace.passes, trace.produced_by
            )
            np.testing.assert_array_equal(np.asarray(shaped.logprobs), own)
            for q, step in enumerate(trace.passes[1:], 1):  # a verify pass: [last] + k drafts
                k, emitted = len(step["ids"]) - 1, trace.produced_by.count(q)
                verified += k > 0
                rejected += max(k - (emitted - 1), 0)
            cached += max(p["cached"] for p in trace.passes)
            if strategy == "prefix-cache" and n == 2:  # built on the first prompt, then the second's suffix
                assert len(trace.passes[0]["built"]) == 2 and trace.passes[0]["built"][0] == 0
        if strategy == "speculative":
            assert verified and rejected  # verify passes whose drafts were not all taken
        if strategy == "prefix-cache":
            assert cached > 0  # the second prompt reused the first's prefix
        session.close()


def test_a_timed_trial_reads_the_trace_once_per_request_never_per_step(tiny_model_dir, tmp_path):
    """Timed trials carry ``trace = None``: a session reads it once per request (the speculative
    loop, the prefix cache's prefill and its decode loop each once), whatever the number of steps,
    and its hot path is an ``is not None`` test per step."""
    from workbench.testing.helpers import ListProbe, build_tiny_model, request_for

    class CountingProbe(ListProbe):
        reads = 0

        @property
        def trace(self):
            type(self).reads += 1
            return None

    draft = build_tiny_model(tmp_path / "draft", seed=1)
    for strategy, params, reads in (
        ("speculative", {"draft": str(draft)}, 1),
        ("prompt-lookup", {}, 1),
        ("prefix-cache", {}, 2),
        ("baseline", {}, 2),
    ):
        session = load_session(tiny_model_dir, strategy, **params)
        CountingProbe.reads = 0
        probe = CountingProbe()
        output = session.generate(
            request_for(session, "w1 w2 w3 w4", max_new_tokens=12, ignore_eos=True), probe
        )
        assert len(output.token_ids) == 12 and len(probe.steps) > 1
        assert CountingProbe.reads == reads, strategy
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
draft = "{draft}"
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
name = "assisted"
strategy = "hf-assisted"
model = "{m}"
draft = "{m}"
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


@pytest.fixture(scope="module")
def near_draft(tiny_model_dir, tmp_path_factory):
    """A draft close to the tiny target (its weights + 2 % noise): it proposes the target's argmax
    almost everywhere and the runner-up at some near-ties, as a good distilled draft does."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path_factory.mktemp("near-draft") / "model"
    shutil.copytree(tiny_model_dir, folder)
    weights = load_file(folder / "model.safetensors")
    gen = torch.Generator().manual_seed(7)
    noisy = {
        k: (v + 0.02 * v.abs().mean() * torch.randn(v.shape, generator=gen).to(v.dtype)).contiguous()
        for k, v in weights.items()
    }
    save_file(noisy, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def _run(spec_text, folder, name="run"):
    from workbench.analysis.run import analyze_run
    from workbench.run.execute import RunExecutor

    db = folder / f"{name}.db"
    with Store(db) as store:
        result = RunExecutor(parse_spec(spec_text), store).run()
        assert result.status == "ok", result.errors
        trials = [t for t in store.trials(result.run_id) if not t.warmup]
        return (
            db,
            analyze_run(store.load_run(result.run_id)),
            trials,
            store.equivalence_positions(result.run_id),
        )


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_run_checks_its_lossless_variants_position_by_position(tiny_model_dir, near_draft, tmp_path, dtype):
    """A real run on a tiny random model: baseline, speculative (a draft close to the target, so
    drafts are rejected and rolled back), prompt lookup, a prefix cache, transformers' assisted
    generation (no trace: unchecked) and int4. Every lossless variant that traces is replayed and
    every one of its positions judged: identical in float32, identical or equivalent in bfloat16."""
    pytest.importorskip("torchao")
    spec = _SPEC.format(m=tiny_model_dir, draft=near_draft, dtype=dtype)
    db, analysis, _, positions = _run(spec, tmp_path, dtype)
    checked = analysis.equivalence
    assert checked is not None and set(checked.variants) == {"speculative", "lookup", "prefix", "assisted"}
    assisted = checked.variants.pop("assisted")
    assert assisted.status == "unchecked" and assisted.judged.positions == 0
    assert "does not report its forward passes" in equivalence_text(assisted)
    for name, check in checked.variants.items():
        j = check.judged
        assert j is not None and j.prompts == 3 and j.own_kld is not None, name
        assert not j.unchecked and j.not_own_argmax == 0, (name, j)
        replayed = [p for p in positions if p["variant"] == name and p["source"] == "replay"]
        assert len(replayed) == 48 and all(p["own_top_id"] is not None for p in replayed)
        # a timed output that differs from the replay's (other draft lengths): judged on its tokens
        timed = [p for p in positions if p["variant"] == name and p["source"] == "trial"]
        assert j.positions == 48 + len(timed) and all(p["own_top_id"] is None for p in timed)
    # what the replays ran: the speculative loop's verify passes read drafts, the prefix cache reused
    spec_rows = [p for p in positions if p["variant"] == "speculative"]
    assert max(p["pass_tokens"] for p in spec_rows) > 1
    assert max(p["cached"] for p in positions if p["variant"] == "prefix") > 0
    floor = checked.floor
    int4 = next(f for f in analysis.quality.figures if f.variant == "int4" and f.source == "output")
    assert not floor.within(int4.kld_mean)  # weights rounded to 4 bits: far outside the arithmetic's floor
    if dtype == "float32":
        assert all(c.status == "identical" for c in checked.variants.values())
    else:
        assert floor.kld > 0  # bf16 rounds the passes differently
        assert all(c.status in ("identical", "equivalent") for c in checked.variants.values()), [
            equivalence_text(c) for c in checked.variants.values()
        ]
    from click.testing import CliRunner

    from workbench.cli import cli

    shown = CliRunner().invoke(cli, ["show", "1", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.output.split())  # the report wraps its lines
    assert "Numerical floor (" in flat and "outside the numerical floor" in flat
    assert "judged on its own tokens, each against its own floor" in flat
    data = json.loads(CliRunner().invoke(cli, ["show", "1", "--db", str(db), "--json"]).output)
    variants = data["equivalence"]["variants"]
    assert set(variants) == {"speculative", "lookup", "prefix", "assisted"}
    assert (
        variants["speculative"]["judged"]["positions"] >= 48
        and variants["speculative"]["checked"] == "replay"
    )


_FAULT = """
name = "fault"
repetitions = 2
warmup = 0
quality = true  # float32 on the CPU with lossless variants alone: the pass runs when asked
[[variants]]
name = "baseline"
model = "{m}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "speculative"
strategy = "speculative"
model = "{m}"
draft = "{draft}"
dtype = "{dtype}"
device = "cpu"
[[variants]]
name = "tolerant"
strategy = "tolerant-speculative"
model = "{m}"
draft = "{draft}"
dtype = "{dtype}"
device = "cpu"
[[workloads]]
name = "chat"
max_new_tokens = 16
ignore_eos = true
prompts = ["w1 w2 w3 w4 w5 w6 the a of w1 w2", "w1 w2 w3 w4 w5 w6 the a of w1 w2 w7 w8 and w9",
           "w3 w4 the w5 of w6 the w3 w4 the"]
"""

_TOLERANT = '''"""A planted fault (tests/test_equivalence.py): speculative decoding whose greedy acceptance takes
a draft token within EQ_TOLERANCE nats of the target's argmax."""

import os

from workbench_strategies.speculative import SpeculativeStrategy


class TolerantSpeculative(SpeculativeStrategy):
    name = "tolerant-speculative"

    def load(self, variant, device):
        from workbench_strategies.speculative import loop

        session = super().load(variant, device)
        honest_generate, honest_accept = session.generate, loop._accept
        tolerance = float(os.environ["EQ_TOLERANCE"])

        def accept(logits, draft, sampler):
            if not sampler.greedy or not draft.tokens:
                return honest_accept(logits, draft, sampler)
            lp = logits.float().log_softmax(-1)
            top = lp.argmax(-1).tolist()
            n = 0
            while n < len(draft.tokens) and float(lp[n, top[n]] - lp[n, draft.tokens[n]]) <= tolerance:
                n += 1
            return [*draft.tokens[:n], top[n]], n

        def generate(request, probe):
            loop._accept = accept
            try:
                return honest_generate(request, probe)
            finally:
                loop._accept = honest_accept

        session.generate = generate
        return session
'''


@pytest.fixture
def tolerant_plugin(tmp_path, monkeypatch):
    """The planted fault, registered through the ``workbench.strategies`` entry point of a
    distribution on PYTHONPATH (the workers are subprocesses: they find it the same way)."""
    import sys

    from workbench.core import registry

    folder = tmp_path / "plugins"
    (folder / "eq_core_faults-0.1.dist-info").mkdir(parents=True)
    (folder / "tolerant_speculative.py").write_text(_TOLERANT)
    (folder / "eq_core_faults-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: eq-core-faults\nVersion: 0.1\n"
    )
    (folder / "eq_core_faults-0.1.dist-info" / "entry_points.txt").write_text(
        "[workbench.strategies]\ntolerant-speculative = tolerant_speculative:TolerantSpeculative\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    )
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()
    sys.modules.pop("tolerant_speculative", None)


@pytest.mark.slow
@pytest.mark.usefixtures("tolerant_plugin")
@pytest.mark.parametrize(("dtype", "tolerance"), [("bfloat16", 0.003), ("float32", 0.01)])
def test_a_planted_acceptance_tolerance_is_caught_in_a_real_run(
    tiny_model_dir, near_draft, tmp_path, monkeypatch, dtype, tolerance
):
    """Speculative decoding whose acceptance takes a draft within a small tolerance of the argmax,
    beside the honest one with the same draft. The tolerance changes outputs (asserted); the check
    reports it not equivalent: it emitted tokens that are not its own pass's argmax. In bfloat16 the
    old check (the first divergence against a run-wide margin of twice the largest top shift) called
    this fault "numerically equivalent; 6 of 6 divergences at near-ties"."""
    monkeypatch.setenv("EQ_TOLERANCE", str(tolerance))
    spec = _FAULT.format(m=tiny_model_dir, draft=near_draft, dtype=dtype)
    _, analysis, trials, positions = _run(spec, tmp_path, dtype)
    outputs = {(t.variant, t.prompt_id, t.repetition): t.output_token_ids for t in trials}
    changed = [k for k, v in outputs.items() if k[0] == "tolerant" and v != outputs[("baseline", *k[1:])]]
    assert changed, "the planted fault never changed an output: nothing to catch"
    checks = analysis.equivalence.variants
    honest, faulty = checks["speculative"], checks["tolerant"]
    assert honest.status in ("identical", "equivalent"), equivalence_text(honest)
    assert faulty.status not in ("identical", "equivalent") and not faulty.lossless
    assert faulty.judged.not_own_argmax > 0
    assert faulty.status == ("mismatch" if dtype == "float32" else "unexplained")
    assert "NOT the argmax of its own pass" in equivalence_text(faulty) or dtype == "float32"
    # each prompt's distinct outputs are judged once, however many repetitions gave them: the
    # replay's and every timed one
    replayed: dict[str, list[int]] = {}
    for p in positions:
        if p["variant"] == "tolerant" and p["source"] == "replay":
            replayed.setdefault(p["prompt_id"], []).append(p["token_id"])
    distinct = {
        (t.prompt_id, tuple(json.loads(t.output_token_ids))) for t in trials if t.variant == "tolerant"
    }
    distinct |= {(prompt, tuple(tokens)) for prompt, tokens in replayed.items()}
    assert faulty.judged.outputs == len(distinct) and faulty.judged.prompts == 3


@pytest.mark.slow
def test_a_compiled_variant_is_checked_through_its_own_compiled_passes(tiny_model_dir, tmp_path):
    """``compile = true`` beside the eager baseline in bfloat16: the pass runs for it (its kernels
    round differently), replays it through the compiled decode step and judges every position."""
    from workbench.run.quality import quality_wanted, scoring_plan

    spec = f"""
name = "compiled"
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
model = "{tiny_model_dir}"
dtype = "bfloat16"
device = "cpu"
[[variants]]
name = "compiled"
model = "{tiny_model_dir}"
dtype = "bfloat16"
device = "cpu"
compile = true
[[workloads]]
name = "chat"
max_new_tokens = 12
ignore_eos = true
prompts = ["w1 w2 w3 w4 w5 w6 the a of w1 w2", "w3 w4 the w5 of w6 the w3 w4 the"]
"""
    parsed = parse_spec(spec)
    assert quality_wanted(parsed) and "compiled" in scoring_plan(parsed)["compiled"]
    _, analysis, _, positions = _run(spec, tmp_path)
    check = analysis.equivalence.variants["compiled"]
    assert check.judged.positions == 24 and check.judged.own_kld is not None, equivalence_text(check)
    assert check.status in ("identical", "equivalent"), equivalence_text(check)
    assert {p["pass_tokens"] for p in positions if p["variant"] == "compiled"} >= {1}


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


def test_a_run_checked_the_old_way_is_read_from_its_database_with_its_floor(tmp_path):
    """A run recorded before the replay check (lossless variants with a shape, no `checked`, the A/A
    floor in `quality_floor`) is read back through the store's loader and judged the old way, against
    the floor its rows hold: made from the sample run by taking away what the replay recorded."""
    import shutil
    import sqlite3

    from workbench.analysis.run import analyze_run
    from workbench.core.resources import resource_path

    db = tmp_path / "old.db"
    shutil.copyfile(resource_path("sample", "demo.db"), db)
    with sqlite3.connect(db) as c:
        c.execute(
            "update quality_variants set checked = null, shape = 'verify k=3' where status = 'lossless'"
        )
        c.execute("delete from equivalence_positions")
        c.executemany(
            "insert into quality_floor (run_id, shape, workload, prompt_id, position, kld, top_shift) "
            "values (1, 'verify k=3', 'summarise-short', 'p0', ?, ?, ?)",
            [(i, 1e-6 * (i + 1), 0.01 * (i + 1)) for i in range(4)],
        )
    with Store(db, create=False) as store:
        loaded = store.load_run(1)
    assert len(loaded.quality_floor) == 4
    equivalence = analyze_run(loaded).equivalence
    assert equivalence is not None and equivalence.floor is not None
    (shape,) = equivalence.floor.shapes
    assert (shape.shape, shape.positions) == ("verify k=3", 4)
    assert shape.kld_max == pytest.approx(4e-6) and shape.top_shift_max == pytest.approx(0.04)
    assert set(equivalence.variants) == {"prompt-lookup", "speculative", "prefix-cache"}
    for check in equivalence.variants.values():
        assert check.floor is equivalence.floor and check.outputs > 0
        assert equivalence_text(check).endswith("[checked the old way]")
