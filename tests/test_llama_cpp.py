"""The ``llama-cpp`` strategy with the real llama.cpp (llama-cpp-python) on the demo model's own GGUF
(SmolLM2-135M, Q4_1, as shipped): tokens one per step under the runner, the footprint figures, greedy
output identical to the transformers baseline once the weights are the same (F32 of the Q4_1 file),
the GGUF's chat template, exact ``ignore_eos`` lengths, seeded sampling, cancel, re-quantization
cached and atomic, a quantized KV cache, and bad input in one line. Skipped without llama-cpp-python
(``make llama-cpp``); tests/test_runtimes.py checks the message without it."""

from __future__ import annotations

import os
import shutil

import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make llama-cpp)")

from workbench.core.device import Device  # noqa: E402
from workbench.core.errors import ModelSourceError, SpecError, StrategyError  # noqa: E402
from workbench.core.strategy import Cancelled, Prompt, Request  # noqa: E402
from workbench.sources import ensure_demo_gguf  # noqa: E402
from workbench.testing.helpers import ListProbe, load_session, request_for  # noqa: E402

pytestmark = pytest.mark.demo
DEMO = "demo:smollm2-135m"
PROMPTS = ["def fibonacci(n):", "The capital of France is", "One, two, three,"]
CHAT = Prompt(id="chat", messages=({"role": "user", "content": "What is 2+2?"},))


@pytest.fixture(scope="module")
def demo_gguf():
    return ensure_demo_gguf("smollm2-135m")


@pytest.fixture(scope="module")
def q4_1(demo_gguf):
    session = load_session(DEMO, "llama-cpp", dtype="auto", n_ctx=1024)
    yield session
    session.close()


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory, demo_gguf):
    """A copy of the demo GGUF as a plain ``.gguf`` source, its re-quantized files in a private cache."""
    root = tmp_path_factory.mktemp("llama-cpp")
    source = root / "smollm2.gguf"
    shutil.copyfile(demo_gguf, source)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_CACHE", str(root / "cache"))
    yield source, root / "cache" / "models" / "llama-cpp"
    mp.undo()


def run(session, prompt, **plan):
    from workbench.run.runner import TrialRunner
    from workbench.testing.helpers import trial_plan

    return TrialRunner(session, Device("cpu")).run(trial_plan(prompt, **plan))


def test_the_demo_gguf_as_shipped_reports_its_footprint(q4_1, demo_gguf):
    assert q4_1.dtype == "Q4_1" and q4_1.path == demo_gguf
    # SmolLM2-135M: 30 layers, 3 KV heads of 64, an f16 cache: 2 * 30 * 3 * 64 * 2 bytes per token
    assert q4_1.model_shape == {"layers": 30, "kv_heads": 3, "head_dim": 64, "bytes_per_element": 2}
    assert q4_1.kv_bytes_per_token == 23040
    assert q4_1.context_length == 1024  # the n_ctx asked for
    assert 0.8 * demo_gguf.stat().st_size / 2**20 < q4_1.weights_mb <= demo_gguf.stat().st_size / 2**20


def test_tokens_stream_one_per_step_with_ttft_and_tpot(q4_1):
    result = run(q4_1, PROMPTS[0], max_new_tokens=12, ignore_eos=True)
    assert result.status == "ok", result.record.error
    assert result.record.output_tokens == 12
    assert [s["n_tokens"] for s in result.steps] == [1] * 12
    assert result.record.ttft_ms > 0 and result.record.tpot_ms > 0
    # llama.cpp's own counters saw the same work: the prompt in one prefill, then one eval per token
    assert q4_1.last_timings["prompt_tokens"] == result.record.input_tokens
    assert q4_1.last_timings["eval_tokens"] == 11


def test_greedy_output_matches_the_baseline_on_the_same_weights(private_cache):
    pytest.importorskip("torch")
    source, _ = private_cache
    ours = load_session(source, "llama-cpp", dtype="auto", gguf_type="F32", n_ctx=512)
    baseline = load_session(DEMO, "baseline")
    for text in PROMPTS:
        a = ours.generate(request_for(ours, text, max_new_tokens=16, ignore_eos=True), ListProbe())
        b = baseline.generate(request_for(baseline, text, max_new_tokens=16, ignore_eos=True), ListProbe())
        assert a.token_ids == b.token_ids, text
    # the GGUF's chat template renders the prompt as transformers renders the converted model's
    assert ours.encode(CHAT) == baseline.encode(CHAT)
    assert [ours.encode(Prompt(id="raw", prompt=t)) for t in PROMPTS] == [
        baseline.encode(Prompt(id="raw", prompt=t)) for t in PROMPTS
    ]
    ours.close()
    baseline.close()


@pytest.mark.parametrize("budget", [1, 7, 33])
def test_ignore_eos_gives_exactly_the_budget(q4_1, budget):
    request = Request(prompt=CHAT, input_ids=tuple(q4_1.encode(CHAT)), max_new_tokens=budget, ignore_eos=True)
    out = q4_1.generate(request, ListProbe())
    assert len(out.token_ids) == budget and out.finish_reason == "length"


def test_eos_ends_a_chat_answer(q4_1):
    request = Request(prompt=CHAT, input_ids=tuple(q4_1.encode(CHAT)), max_new_tokens=64)
    out = q4_1.generate(request, ListProbe())
    assert out.finish_reason == "eos" and out.token_ids[-1] in q4_1.eos_ids
    assert "4" in out.text


def test_a_stop_string_ends_the_generation(q4_1):
    out = q4_1.generate(request_for(q4_1, "One, two, three,", max_new_tokens=30, stop=("five",)), ListProbe())
    assert out.finish_reason == "stop" and "five" in out.text


def test_seeded_sampling_repeats_and_the_seed_matters(q4_1):
    def sample(seed):
        request = request_for(
            q4_1, PROMPTS[1], max_new_tokens=16, ignore_eos=True, temperature=1.2, seed=seed
        )
        return q4_1.generate(request, ListProbe()).token_ids

    assert sample(11) == sample(11)
    assert any(sample(11) != sample(s) for s in (12, 13, 14))
    with_top = request_for(
        q4_1, PROMPTS[1], max_new_tokens=8, temperature=0.7, top_k=1, ignore_eos=True, seed=5
    )
    greedy = request_for(q4_1, PROMPTS[1], max_new_tokens=8, ignore_eos=True)
    assert q4_1.generate(with_top, ListProbe()).token_ids == q4_1.generate(greedy, ListProbe()).token_ids


def test_cancel_stops_at_the_step_and_the_next_request_is_whole(q4_1):
    request = request_for(q4_1, PROMPTS[0], max_new_tokens=20, ignore_eos=True)
    probe = ListProbe(cancel_after=4)
    with pytest.raises(Cancelled):
        q4_1.generate(request, probe)
    assert len(probe.tokens) == 4
    again = q4_1.generate(request, ListProbe())
    assert len(again.token_ids) == 20 and again.token_ids[:4] == probe.tokens


def test_a_prompt_past_n_ctx_fails_the_trial_in_one_line(q4_1):
    request = Request(prompt=Prompt(id="p", prompt="x"), input_ids=(28,) * 1020, max_new_tokens=10)
    with pytest.raises(StrategyError, match="raise n_ctx"):
        q4_1.generate(request, ListProbe())


# --- score: teacher forcing --------------------------------------------------------------------------


def _kld(p, q):
    """Per position KL(P || Q) of two [n, vocab] log-probability arrays."""
    import numpy as np

    return (np.exp(p.astype(np.float64)) * (p.astype(np.float64) - q)).sum(-1)


def test_greedy_tokens_are_the_argmax_of_the_sessions_own_scores_and_scoring_leaves_generate_alone(q4_1):
    import numpy as np

    request = request_for(q4_1, PROMPTS[1], max_new_tokens=24, ignore_eos=True)
    before = q4_1.generate(request, ListProbe()).token_ids
    ids = [*request.input_ids, *before]
    scores = q4_1.score(ids, len(request.input_ids))
    assert scores.full and scores.logprobs.shape == (24, q4_1.llm.n_vocab())
    assert scores.logprobs.dtype == np.float32
    assert np.allclose(np.exp(scores.logprobs).sum(-1), 1.0, atol=1e-4)
    assert scores.logprobs.argmax(-1).tolist() == before
    after = q4_1.generate(request, ListProbe()).token_ids
    assert after == before
    # from position 1: the prompt's own tokens too, and the same rows where the two overlap
    whole = q4_1.score(ids, 1)
    assert whole.logprobs.shape[0] == len(ids) - 1
    assert np.allclose(whole.logprobs[-24:], scores.logprobs, atol=1e-3)


def test_scores_span_several_prefill_slices(demo_gguf):

    wide = load_session(DEMO, "llama-cpp", dtype="auto", n_ctx=256, n_batch=256)
    narrow = load_session(DEMO, "llama-cpp", dtype="auto", n_ctx=256, n_batch=7)
    ids = wide.encode(Prompt(id="p", prompt=" ".join(PROMPTS * 3)))
    a, b = wide.score(ids, 3).logprobs, narrow.score(ids, 3).logprobs
    assert a.shape == b.shape == (len(ids) - 3, wide.llm.n_vocab())
    assert _kld(a, b).max() < 1e-3 and (a.argmax(-1) == b.argmax(-1)).all()
    wide.close()
    narrow.close()


def test_the_f32_gguf_scores_as_the_baseline_and_a_requantized_one_further_away(private_cache):
    pytest.importorskip("torch")
    source, _ = private_cache
    baseline = load_session(DEMO, "baseline")
    f32 = load_session(source, "llama-cpp", dtype="auto", gguf_type="F32", n_ctx=512)
    q8 = load_session(source, "llama-cpp", dtype="auto", gguf_type="Q8_0", n_ctx=512)
    for text in PROMPTS[:2]:
        request = request_for(baseline, text, max_new_tokens=32, ignore_eos=True)
        ids = [*request.input_ids, *baseline.generate(request, ListProbe()).token_ids]
        reference = baseline.score(ids, 1).logprobs
        ours, requantized = f32.score(ids, 1).logprobs, q8.score(ids, 1).logprobs
        # the same weights (the Q4_1 file's values in F32): kernel arithmetic only (~1e-6 measured)
        assert _kld(reference, ours).mean() < 1e-4 and _kld(reference, ours).max() < 1e-2
        assert (reference.argmax(-1) == ours.argmax(-1)).all()
        # Q8_0 of the same file re-rounds every weight: clearly further from the baseline
        assert _kld(reference, requantized).mean() > 10 * _kld(reference, ours).mean()
    for session in (baseline, f32, q8):
        session.close()


def test_scoring_past_n_ctx_or_from_position_0_is_refused_in_one_line(q4_1):
    with pytest.raises(StrategyError, match=r"^the sequence to score \(1030 tokens\).*n_ctx = 1024"):
        q4_1.score([28] * 1030, 1)
    with pytest.raises(ValueError, match="start 0"):
        q4_1.score([1, 2, 3], 0)
    out = q4_1.generate(request_for(q4_1, PROMPTS[2], max_new_tokens=4, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 4  # a refused score leaves the session working


def test_requantizing_is_cached_and_leaves_nothing_half_written(private_cache):
    source, cache = private_cache
    session = load_session(source, "llama-cpp", dtype="auto", gguf_type="Q8_0", n_ctx=256)
    assert session.dtype == "Q8_0" and session.path.parent == cache
    written = session.path.stat().st_mtime_ns
    out = session.generate(request_for(session, PROMPTS[0], max_new_tokens=5, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 5
    assert session.weights_mb > source.stat().st_size / 2**20  # 8.5 bits a weight vs Q4_1's 5
    session.close()
    again = load_session(source, "llama-cpp", dtype="auto", gguf_type="Q8_0", n_ctx=256)
    assert again.path.stat().st_mtime_ns == written  # reused, not quantized again
    again.close()
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".part")]


def test_a_k_quant_is_smaller_than_q8(private_cache):
    source, _ = private_cache
    q4k = load_session(source, "llama-cpp", dtype="auto", gguf_type="Q4_K_M", n_ctx=256)
    assert q4k.dtype == "Q4_K_M"
    q8 = load_session(source, "llama-cpp", dtype="auto", gguf_type="Q8_0", n_ctx=256)
    # 576-wide rows are no multiple of the 256-value k-quant super-block: some tensors fall back to
    # larger types, so SmolLM2's Q4_K_M is ~0.72x its Q8_0 rather than ~0.55x
    assert q4k.weights_mb < 0.8 * q8.weights_mb
    q4k.close()
    q8.close()


def test_a_quantized_kv_cache_is_counted_by_its_blocks(demo_gguf):
    session = load_session(DEMO, "llama-cpp", dtype="auto", kv_type="q8_0", flash_attn=True, n_ctx=256)
    assert session.kv_bytes_per_token == pytest.approx(2 * 30 * 3 * 64 * 34 / 32)
    assert "bytes_per_element" not in session.model_shape
    out = session.generate(request_for(session, PROMPTS[0], max_new_tokens=6, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 6
    session.close()


def test_threads_and_batch_reach_llama_cpp(demo_gguf):
    session = load_session(DEMO, "llama-cpp", dtype="auto", threads=1, n_batch=8, n_ctx=256)
    assert session.llm.context_params.n_threads == 1 and session.llm.context_params.n_batch == 8
    long = " ".join(["one two three"] * 10)  # 30 tokens: four prefill passes of 8
    out = session.generate(request_for(session, long, max_new_tokens=3, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 3 and session.last_timings["prompt_tokens"] >= 30
    session.close()


def test_the_backend_that_ran_is_recorded_and_a_cpu_variant_offloads_nothing(demo_gguf):
    session = load_session(DEMO, "llama-cpp", dtype="auto", n_ctx=256)
    build = (
        "GPU build, no layer or op offload" if llama_cpp.llama_supports_gpu_offload() else "CPU-only build"
    )
    assert session.backend == f"llama.cpp CPU ({build})"
    assert session.llm.model_params.n_gpu_layers == 0
    session.close()


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"gguf_type": "Q9_X"}, SpecError, "gguf_type"),
        ({"kv_type": "q8_0"}, SpecError, "needs flash_attn = true"),
        ({"n_batch": 0}, SpecError, "n_batch must be at least 1"),
        ({"n_gpu_layers": -2}, SpecError, "n_gpu_layers"),
    ],
)
def test_bad_parameters_are_refused_in_one_line(params, error, match):
    with pytest.raises(error, match=match) as info:
        load_session(DEMO, "llama-cpp", dtype="auto", **params)
    assert "\n" not in str(info.value)


def test_dtype_does_not_apply():
    with pytest.raises(StrategyError, match="does not apply to llama-cpp"):
        load_session(DEMO, "llama-cpp", dtype="float32")


def test_a_file_that_is_not_a_gguf_is_refused_before_llama_cpp_reads_it(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model")
    with pytest.raises(ModelSourceError, match="is not a GGUF file") as info:
        load_session(fake, "llama-cpp", dtype="auto")
    assert "\n" not in str(info.value)


def test_a_truncated_gguf_fails_to_load_in_one_line(tmp_path, demo_gguf):
    cut = tmp_path / "cut.gguf"
    with open(demo_gguf, "rb") as src:
        cut.write_bytes(src.read(4 << 20))
    with pytest.raises(ModelSourceError, match=r"llama\.cpp cannot load cut\.gguf") as info:
        load_session(cut, "llama-cpp", dtype="auto")
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_a_transformers_folder_is_converted_with_llama_cpps_converter():
    pytest.importorskip("torch")
    pytest.importorskip(
        "sentencepiece", reason="llama.cpp's converter imports sentencepiece (make llama-cpp)"
    )
    from workbench.sources import ensure_demo_model

    folder = ensure_demo_model("smollm2-135m")  # the demo as a safetensors folder
    session = load_session(folder, "llama-cpp", dtype="auto", n_ctx=256)
    assert session.dtype == "F16" and session.path.name.startswith(f"hf-{folder.name}-")
    assert not [p for p in session.path.parent.iterdir() if p.name.endswith(".part")]
    out = session.generate(request_for(session, PROMPTS[0], max_new_tokens=8, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 8
    session.close()
    assert os.path.getsize(session.path) > 2 * 134e6  # 134M weights in 16 bits
