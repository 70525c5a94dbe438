"""The ``onnxruntime-genai`` strategy on tiny random llamas built by ONNX Runtime GenAI's own model
builder (a few seconds each, into a private cache): tokens one per step under the runner, fp32
identical to the baseline at greedy, exact ``ignore_eos`` lengths, seeded sampling, cancel, the
footprint figures, an existing ORT folder as it is, and the bad inputs in one line. Skipped without
onnxruntime-genai (``make ort-genai``); tests/test_runtimes.py checks the message without it."""

from __future__ import annotations

import json
import shutil

import pytest

from workbench.core.errors import SpecError, StrategyError
from workbench.core.strategy import Cancelled, Prompt, Request
from workbench.testing.helpers import ListProbe, load_session, request_for, tiny_prompt

og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed (make ort-genai)")
torch = pytest.importorskip("torch")
pytest.importorskip("onnx_ir", reason="the ONNX Runtime GenAI model builder needs onnx-ir (make ort-genai)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ort_cache(tmp_path_factory):
    """Built models go to a private cache (the builder's output is per model folder anyway)."""
    mp = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("ort-cache")
    mp.setenv("WORKBENCH_CACHE", str(cache))
    yield cache
    mp.undo()


@pytest.fixture(scope="module")
def tiny64(tiny_model_dir_64):
    return tiny_model_dir_64  # heads of 16: ONNX Runtime's GroupQueryAttention refuses smaller ones


@pytest.fixture(scope="module")
def fp32(tiny64, ort_cache):
    session = load_session(tiny64, "onnxruntime-genai", dtype="auto", precision="fp32")
    yield session
    session.close()


@pytest.fixture(scope="module")
def int4(tiny64, ort_cache):
    session = load_session(tiny64, "onnxruntime-genai", dtype="auto", precision="int4")
    yield session
    session.close()


def run(session, prompt, **plan):
    from workbench.core.device import Device
    from workbench.run.runner import TrialRunner
    from workbench.testing.helpers import trial_plan

    return TrialRunner(session, Device("cpu")).run(trial_plan(prompt, **plan))


def test_greedy_fp32_is_token_identical_to_the_baseline(tiny64, fp32):
    baseline = load_session(tiny64, "baseline")
    for start in range(4):
        text = tiny_prompt(10, start)
        ours = fp32.generate(request_for(fp32, text, max_new_tokens=12, ignore_eos=True), ListProbe())
        theirs = baseline.generate(
            request_for(baseline, text, max_new_tokens=12, ignore_eos=True), ListProbe()
        )
        assert ours.token_ids == theirs.token_ids
    chat = Prompt(id="c", messages=({"role": "user", "content": tiny_prompt(5)},))
    assert fp32.encode(chat) == baseline.encode(chat)  # the model folder's template, as the baseline's
    baseline.close()


def test_tokens_stream_one_per_step_with_ttft_and_tpot(int4):
    result = run(int4, tiny_prompt(12), max_new_tokens=9, ignore_eos=True)
    assert result.status == "ok", result.record.error
    assert result.record.output_tokens == 9
    assert [s["n_tokens"] for s in result.steps] == [1] * 9
    assert result.record.ttft_ms > 0 and result.record.tpot_ms > 0


@pytest.mark.parametrize("budget", [1, 5, 17])
def test_ignore_eos_gives_exactly_the_budget(int4, budget):
    out = int4.generate(
        request_for(int4, tiny_prompt(8), max_new_tokens=budget, ignore_eos=True), ListProbe()
    )
    assert len(out.token_ids) == budget and out.finish_reason == "length"


def test_seeded_sampling_repeats_and_the_seed_matters(int4):
    def sample(seed):
        request = request_for(
            int4, tiny_prompt(8), max_new_tokens=16, ignore_eos=True, temperature=1.5, seed=seed
        )
        return int4.generate(request, ListProbe()).token_ids

    assert sample(3) == sample(3)
    assert any(sample(3) != sample(s) for s in (4, 5, 6))


def test_cancel_stops_at_the_step_and_the_next_request_is_whole(int4):
    request = request_for(int4, tiny_prompt(8), max_new_tokens=20, ignore_eos=True)
    probe = ListProbe(cancel_after=3)
    with pytest.raises(Cancelled):
        int4.generate(request, probe)
    assert len(probe.tokens) == 3
    again = int4.generate(request, ListProbe())
    assert len(again.token_ids) == 20 and again.token_ids[:3] == probe.tokens


def test_footprint_kv_and_context_are_reported(fp32, int4):
    # 2 layers x 2 KV heads x 16 x fp32 keys and values: 2 * 2 * 2 * 16 * 4
    for session in (fp32, int4):
        assert session.kv_bytes_per_token == 512
        assert session.model_shape == {"layers": 2, "kv_heads": 2, "head_dim": 16, "bytes_per_element": 4}
        assert session.context_length == 256
    assert fp32.dtype == "fp32" and int4.dtype == "int4"
    assert 0 < int4.weights_mb < fp32.weights_mb


def test_an_ort_genai_folder_is_used_as_it_is(int4):
    session = load_session(int4.folder, "onnxruntime-genai", dtype="auto", precision="fp16")
    assert session.folder == int4.folder and session.dtype == "int4"  # not rebuilt at another precision
    session.close()


def test_a_stop_string_ends_the_generation(fp32):
    full = fp32.generate(request_for(fp32, tiny_prompt(10), max_new_tokens=12, ignore_eos=True), ListProbe())
    word = fp32.decode(full.token_ids[2:3]).strip()
    out = fp32.generate(
        request_for(fp32, tiny_prompt(10), max_new_tokens=12, ignore_eos=True, stop=(word,)), ListProbe()
    )
    assert out.finish_reason == "stop" and len(out.token_ids) <= 3


def test_an_unsupported_architecture_fails_in_one_line_and_leaves_no_build(tiny64, tmp_path, ort_cache):
    folder = tmp_path / "not-llama"
    shutil.copytree(tiny64, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["GPT2LMHeadModel"]
    (folder / "config.json").write_text(json.dumps(config))
    # refused before a build is spent on it, from the builder's own list of architectures
    with pytest.raises(StrategyError) as info:
        load_session(folder, "onnxruntime-genai", dtype="auto")
    message = str(info.value)
    assert "\n" not in message and "has no graph for GPT2LMHeadModel" in message
    leftovers = [
        p.name for p in (ort_cache / "models" / "ort-genai").iterdir() if p.name.startswith("not-llama")
    ]
    assert leftovers == []


def test_bad_parameters_are_refused_in_one_line(tiny64):
    with pytest.raises(SpecError, match="precision"):
        load_session(tiny64, "onnxruntime-genai", dtype="auto", precision="int3")
    with pytest.raises(StrategyError, match="does not apply to onnxruntime-genai"):
        load_session(tiny64, "onnxruntime-genai", dtype="float32")


def test_a_prompt_longer_than_the_context_fails_the_trial_not_the_session(int4):
    request = Request(prompt=Prompt(id="p", prompt="x"), input_ids=(5,) * 250, max_new_tokens=10)
    with pytest.raises(StrategyError, match="context"):
        int4.generate(request, ListProbe())


# --- score: teacher forcing --------------------------------------------------------------------------


def _kld(p, q):
    import numpy as np

    return (np.exp(p.astype(np.float64)) * (p.astype(np.float64) - q)).sum(-1)


def test_fp32_scores_as_the_baseline_and_int4_further_away(tiny64, fp32, int4):
    baseline = load_session(tiny64, "baseline")
    for start in range(3):
        request = request_for(baseline, tiny_prompt(10, start), max_new_tokens=16, ignore_eos=True)
        ids = [*request.input_ids, *baseline.generate(request, ListProbe()).token_ids]
        reference = baseline.score(ids, 1).logprobs
        ours = fp32.score(ids, 1).logprobs
        assert ours.shape == reference.shape == (len(ids) - 1, fp32.vocab_size)
        assert _kld(reference, ours).max() < 1e-5
        assert (reference.argmax(-1) == ours.argmax(-1)).all()
        assert _kld(reference, int4.score(ids, 1).logprobs).mean() > 100 * _kld(reference, ours).mean()
    baseline.close()


def test_greedy_tokens_are_the_argmax_of_the_sessions_own_scores_and_scoring_leaves_generate_alone(int4):
    import numpy as np

    request = request_for(int4, tiny_prompt(12, 3), max_new_tokens=20, ignore_eos=True)
    before = int4.generate(request, ListProbe()).token_ids
    ids = [*request.input_ids, *before]
    scores = int4.score(ids, len(request.input_ids))
    assert scores.full and scores.logprobs.shape == (20, int4.vocab_size)
    assert scores.logprobs.dtype == np.float32
    assert np.allclose(np.exp(scores.logprobs).sum(-1), 1.0, atol=1e-4)
    assert scores.logprobs.argmax(-1).tolist() == before
    assert int4.generate(request, ListProbe()).token_ids == before


def test_scoring_past_the_context_is_refused_in_one_line(int4):
    with pytest.raises(StrategyError, match=r"^the sequence to score \(300 tokens\).*context \(256\)"):
        int4.score([5] * 300, 1)
    with pytest.raises(ValueError, match="start 0"):
        int4.score([5, 6, 7], 0)
