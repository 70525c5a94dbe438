"""``speculative`` with a draft from another runtime (``draft_runtime``): llama.cpp on the demo model's
own GGUF (Q4_1) and ONNX Runtime GenAI on tiny llamas its builder makes; greedy output identical to
the baseline through rejections (the draft's cache rolled back), the step accounting, seeded sampling,
the footprint of both models, a draft with another vocabulary refused in one line, and the spec keys
that belong to another runtime refused. The runtime tests skip without that runtime (``make
llama-cpp`` / ``make ort-genai``); ``make runtimes-check`` runs them."""

from __future__ import annotations

import importlib.util

import pytest

from workbench.core.errors import SpecError, StrategyError
from workbench.testing.helpers import ListProbe, load_session, request_for, tiny_prompt

torch = pytest.importorskip("torch")

SPEC = "workbench_strategies.speculative:SpeculativeStrategy"
DEMO = "demo:smollm2-135m"
no_llama = importlib.util.find_spec("llama_cpp") is None
no_ort = importlib.util.find_spec("onnxruntime_genai") is None or importlib.util.find_spec("onnx_ir") is None
needs_llama = pytest.mark.skipif(no_llama, reason="llama-cpp-python is not installed (make llama-cpp)")
needs_ort = pytest.mark.skipif(no_ort, reason="onnxruntime-genai is not installed (make ort-genai)")


# --- the spec keys: no runtime needed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"draft_precision": "int8"}, "draft_precision applies to a llama-cpp / onnxruntime-genai draft"),
        ({"draft_threads": 2}, "draft_threads applies to a llama-cpp / onnxruntime-genai draft"),
        (
            {"draft_runtime": "llama-cpp", "draft_dtype": "float16"},
            "draft_dtype applies to a transformers draft",
        ),
        ({"draft_runtime": "onnxruntime-genai", "draft_vocab": 100}, "draft_vocab applies to a transformers"),
        (
            {"draft_runtime": "llama-cpp", "draft_prefill": "from-target"},
            "needs a transformers or onnxruntime-genai draft",
        ),
        ({"draft_runtime": "llama-cpp", "draft_precision": "int8"}, "a llama-cpp one has draft_gguf_type"),
        ({"draft_runtime": "onnxruntime-genai", "draft_gguf_type": "Q8_0"}, "one has draft_precision"),
        ({"draft_runtime": "llama-cpp", "draft_threads": -1}, "draft_threads must be 0"),
        ({"draft_runtime": "mlx"}, "draft_runtime"),
    ],
)
def test_keys_of_another_runtime_are_refused_in_one_line(tiny_model_dir, params, message):
    with pytest.raises(SpecError, match=message) as info:
        load_session(tiny_model_dir, SPEC, draft=str(tiny_model_dir), **params)
    assert "\n" not in str(info.value)


def test_the_draft_keys_are_parameters_with_the_llama_cpp_strategys_gguf_types():
    from workbench_strategies.llama_cpp import LlamaCppConfig
    from workbench_strategies.speculative import SpeculativeConfig

    from workbench.core.config import config_fields

    fields = {f.name: f for f in config_fields(SpeculativeConfig)}
    assert set(fields) >= {"draft_runtime", "draft_gguf_type", "draft_precision", "draft_threads"}
    (theirs,) = [f for f in config_fields(LlamaCppConfig) if f.name == "gguf_type"]
    # one alias (llama_cpp.GgufType): the GUI form and the validation offer the same choices
    assert fields["draft_gguf_type"].choices == theirs.choices and "Q4_K_M" in theirs.choices


def check_accounting(probe: ListProbe, out) -> tuple[int, int, int]:
    """The steps add up; returns (proposed, accepted, steps with a rejection)."""
    assert probe.tokens == out.token_ids
    proposed = accepted = rejections = 0
    for i, (step, info) in enumerate(zip(probe.steps, probe.info, strict=True)):
        if i == 0:
            assert info == {}  # the first token comes from the target's prefill
            continue
        assert 0 <= info["draft_accepted"] <= info["draft_proposed"]
        assert 1 <= len(step) <= info["draft_accepted"] + 1
        proposed += info["draft_proposed"]
        accepted += info["draft_accepted"]
        rejections += info["draft_accepted"] < info["draft_proposed"]
    return proposed, accepted, rejections


# --- llama.cpp: the demo model's own GGUF ----------------------------------------------------------


@pytest.fixture(scope="module")
def demo_pair():
    if no_llama:
        pytest.skip("llama-cpp-python is not installed (make llama-cpp)")
    baseline = load_session(DEMO, "baseline")
    ours = load_session(
        DEMO, SPEC, draft=DEMO, draft_runtime="llama-cpp", num_draft_tokens=6, draft_threads=1
    )
    yield baseline, ours
    ours.close()
    baseline.close()


DEMO_PROMPTS = ["def fibonacci(n):", "The three primary colours are", "Once upon a time, in a small village,"]


@needs_llama
@pytest.mark.demo
def test_llama_cpp_draft_is_token_identical_to_the_baseline_through_rejections(demo_pair):
    baseline, ours = demo_pair
    rejections = accepted = 0
    for text in DEMO_PROMPTS:
        probe = ListProbe()
        out = ours.generate(request_for(ours, text, max_new_tokens=40, ignore_eos=True), probe)
        ref = baseline.generate(request_for(baseline, text, max_new_tokens=40, ignore_eos=True), ListProbe())
        assert out.token_ids == ref.token_ids
        _, acc, rej = check_accounting(probe, out)
        accepted += acc
        rejections += rej
    assert rejections > 0  # the draft's cache was rolled back and drafting went on correctly
    assert accepted > 60  # Q4_1 of the target's own weights agrees on most tokens (3 x 39 drafted)


@needs_llama
@pytest.mark.demo
def test_llama_cpp_draft_footprint_and_seeded_sampling(demo_pair):
    baseline, ours = demo_pair
    # both models resident: the fp32 target and the Q4_1 GGUF; both KV caches
    assert ours.weights_mb > baseline.weights_mb + 50
    assert ours.kv_bytes_per_token == baseline.kv_bytes_per_token + 2 * 30 * 3 * 64 * 2  # f16 llama.cpp cache
    assert ours.context_length <= baseline.context_length

    # Seeded sampling repeats with a fixed schedule: the adaptive one picks each draft's length from
    # the measured step times, so how many draws a sampled answer takes depends on the machine's
    # timing (the answers' distribution does not: the sampling test).
    fixed = load_session(
        DEMO,
        SPEC,
        draft=DEMO,
        draft_runtime="llama-cpp",
        num_draft_tokens=6,
        draft_threads=1,
        schedule="fixed",
    )

    def sample(seed):
        request = request_for(fixed, DEMO_PROMPTS[2], max_new_tokens=24, temperature=0.9, top_k=50, seed=seed)
        probe = ListProbe()
        out = fixed.generate(request, probe)
        check_accounting(probe, out)
        return out.token_ids

    first = sample(7)
    assert sample(7) == first  # the target's seeded generator draws the draft's tokens too
    assert sample(8) != first
    fixed.close()


@needs_llama
def test_llama_cpp_draft_with_another_vocabulary_is_refused(tiny_model_dir):
    with pytest.raises(StrategyError, match="different vocabulary from the target's") as info:
        load_session(tiny_model_dir, SPEC, draft=DEMO, draft_runtime="llama-cpp")
    assert "\n" not in str(info.value)


def test_a_missing_runtime_is_named(tiny_model_dir, monkeypatch):
    from workbench_strategies import speculative

    class Missing:
        def available(self):
            return "needs llama-cpp-python: pip install it"

    real = speculative.runtime_draft
    monkeypatch.setattr(speculative, "runtime_draft", lambda variant: (Missing(), real(variant)[1]))
    with pytest.raises(StrategyError, match="a llama-cpp draft needs llama-cpp-python"):
        load_session(tiny_model_dir, SPEC, draft=str(tiny_model_dir), draft_runtime="llama-cpp")


# --- ONNX Runtime GenAI: tiny llamas its builder makes ---------------------------------------------


@pytest.fixture(scope="module")
def ort_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_CACHE", str(tmp_path_factory.mktemp("ort-cache")))
    yield
    mp.undo()


@needs_ort
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_ort_genai_draft_is_token_identical_to_the_baseline(tiny_model_dir_64, ort_cache, precision):
    target = tiny_model_dir_64
    baseline = load_session(target, "baseline")
    ours = load_session(
        target, SPEC, draft=str(target), draft_runtime="onnxruntime-genai", draft_precision=precision,
        num_draft_tokens=4, draft_threads=1,
    )  # fmt: skip
    proposed = accepted = rejections = 0
    for start in range(4):
        text = tiny_prompt(12, start)
        probe = ListProbe()
        out = ours.generate(request_for(ours, text, max_new_tokens=20, ignore_eos=True), probe)
        ref = baseline.generate(request_for(baseline, text, max_new_tokens=20, ignore_eos=True), ListProbe())
        assert out.token_ids == ref.token_ids
        p, a, r = check_accounting(probe, out)
        proposed, accepted, rejections = proposed + p, accepted + a, rejections + r
    if precision == "fp32":  # the same weights in another runtime: (nearly) every draft token accepted
        assert accepted >= 0.9 * proposed
    else:  # int4 of random weights disagrees often: the rewind path ran
        assert rejections > 0
    assert ours.weights_mb > baseline.weights_mb
    ours.close()
    baseline.close()


@needs_ort
@pytest.mark.slow
def test_ort_genai_draft_with_another_vocabulary_is_refused(tiny_model_dir_64, tmp_path, ort_cache):
    from transformers import AutoTokenizer, LlamaForCausalLM

    other = tmp_path / "other-vocab"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir_64)
    tok.add_tokens(["zzz"])
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir_64)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(other)
    tok.save_pretrained(other)
    with pytest.raises(StrategyError, match="different vocabulary from the target's") as info:
        load_session(
            tiny_model_dir_64,
            SPEC,
            draft=str(other),
            draft_runtime="onnxruntime-genai",
            draft_precision="fp32",
        )
    assert "\n" not in str(info.value)


@needs_ort
@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "params"),
    [
        ("fp32", {"draft_prefill": "from-target"}),
        ("int4", {}),  # auto: the target's own model, on a cpu: from-target
        ("int4", {"draft_prefill": "catch-up", "draft_prefill_chunk": 5}),
        ("int4", {"draft_context": 8, "draft_sinks": 2}),
    ],
)
def test_ort_genai_draft_prefill_modes_are_token_identical(tiny_model_dir_64, ort_cache, precision, params):
    """from-target: ONNX Runtime runs the builder's model on a cache filled from the target's prefill
    (the draft feeds only the generated tokens, never the prompt); catch-up: the prompt in chunks after
    the first token; a bounded context: the sinks and the recent window. Greedy output identical."""
    from workbench_strategies.speculative import loop
    from workbench_strategies.speculative.runtime_drafts import OrtGenAIDrafter, OrtSharedCacheDrafter

    target = tiny_model_dir_64
    baseline = load_session(target, "baseline")
    ours = load_session(
        target, SPEC, draft=str(target), draft_runtime="onnxruntime-genai", draft_precision=precision,
        num_draft_tokens=4, draft_threads=1, **params,
    )  # fmt: skip
    drafter = ours.drafter
    mode = params.get("draft_prefill", "auto")
    shared = mode == "from-target" or (mode == "auto" and "draft_context" not in params)
    assert isinstance(drafter, OrtSharedCacheDrafter if shared else OrtGenAIDrafter)
    fed: list[int] = []
    feed = drafter._feed
    drafter._feed = lambda tokens: fed.append(len(tokens)) or feed(tokens)
    mp = pytest.MonkeyPatch()
    mp.setattr(loop, "catch_up_pays", lambda *args: True)  # read the whole prompt, then draft
    proposed = accepted = 0
    try:
        for start in range(3):
            text = tiny_prompt(12, start)
            probe = ListProbe()
            fed.clear()
            request = request_for(ours, text, max_new_tokens=20, ignore_eos=True)
            out = ours.generate(request, probe)
            ref = baseline.generate(
                request_for(baseline, text, max_new_tokens=20, ignore_eos=True), ListProbe()
            )
            assert out.token_ids == ref.token_ids
            p, a, _ = check_accounting(probe, out)
            proposed, accepted = proposed + p, accepted + a
            n = len(request.input_ids)
            if shared:
                assert max(fed) < n  # the prompt came from the target's cache
                assert probe.info[1]["draft_ms"] is not None  # the copy, in the second step's draft_ms
            elif "draft_context" in params:
                assert fed[0] == 8 < n
            else:
                assert fed[: -(-n // 5)] == [5] * (n // 5) + ([n % 5] if n % 5 else [])
    finally:
        mp.undo()
    assert proposed > 0
    if precision == "fp32":  # the same weights and the target's own keys/values: (nearly) all accepted
        assert accepted >= 0.9 * proposed
    ours.close()
    baseline.close()


@needs_ort
@pytest.mark.slow
def test_ort_genai_draft_from_the_targets_cache_samples_seeded(tiny_model_dir_64, ort_cache):
    ours = load_session(
        tiny_model_dir_64,
        SPEC,
        draft=str(tiny_model_dir_64),
        draft_runtime="onnxruntime-genai",
        draft_precision="int4",
        draft_prefill="from-target",
        num_draft_tokens=3,
        schedule="fixed",
    )  # fmt: skip  (seeded sampling repeats with a fixed schedule: see the llama.cpp test above)

    def sample(seed):
        request = request_for(ours, tiny_prompt(10), max_new_tokens=16, temperature=0.9, top_k=20, seed=seed)
        probe = ListProbe()
        out = ours.generate(request, probe)
        check_accounting(probe, out)
        return out.token_ids

    first = sample(3)
    assert sample(3) == first
    assert sample(4) != first
    ours.close()
