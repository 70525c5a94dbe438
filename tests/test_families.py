"""The model families people load, as tiny random models (``build_tiny_model(family=...)``): every
in-process lever runs on each — the baseline, speculative decoding (a draft that disagrees, so the
target's cache is cut back after rejections), prompt lookup, the prefix cache (a growing history),
static batching, torchao int8 and the quality pass's scoring — or is refused in one line. Gemma 3 and
Mistral have sliding-window layers shorter than the prompts (the case ``strategies/_kv.py`` handles)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workbench.core.errors import StrategyError  # noqa: E402
from workbench.core.strategy import Prompt, Request  # noqa: E402
from workbench.testing.helpers import (  # noqa: E402
    TINY_FAMILIES,
    TINY_SLIDING_WINDOW,
    ListProbe,
    build_tiny_model,
    tiny_prompt,
)
from workbench.testing.helpers import load_session as load  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

# a conversation: each turn's prompt starts with the previous one; longer than the sliding window
TURNS = [tiny_prompt(24, 0)]
for i in range(1, 3):
    TURNS.append(TURNS[-1] + " " + tiny_prompt(10, 40 * i))
assert len(TURNS[0].split()) > 2 * TINY_SLIDING_WINDOW


@pytest.fixture(scope="module", params=TINY_FAMILIES)
def family(request, tmp_path_factory):
    name = request.param
    target = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{name}"), family=name)
    draft = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{name}-draft"), family=name, seed=1)
    return name, target, draft


def ask(session, text, prompt_id, max_new_tokens=10):
    prompt = Prompt(id=prompt_id, prompt=text)
    request = Request(
        prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=max_new_tokens, ignore_eos=True
    )
    probe = ListProbe()
    out = session.generate(request, probe)
    assert probe.tokens == out.token_ids
    return request, out, probe


def test_every_lever_runs_on_every_family(family):
    name, target, draft = family
    baseline = load(target, "baseline")
    expected = [ask(baseline, text, f"turn-{i}")[1].token_ids for i, text in enumerate(TURNS)]

    # the prefix cache: every later turn reuses the previous turn's whole prompt, same tokens
    cache = load(target, "prefix-cache", min_prefix_tokens=4)
    previous = 0
    for i, text in enumerate(TURNS):
        request, out, _ = ask(cache, text, f"turn-{i}")
        assert out.token_ids == expected[i], (name, i)
        assert out.cached_tokens == previous, (name, i)
        previous = len(request.input_ids)

    # speculative decoding with a draft that disagrees: rejections cut the target's cache back
    spec = load(target, "speculative", draft=str(draft), num_draft_tokens=4)
    rejected = 0
    for i, text in enumerate(TURNS):
        _, out, probe = ask(spec, text, f"turn-{i}")
        assert out.token_ids == expected[i], (name, i)
        rejected += sum((s.get("draft_proposed") or 0) - (s.get("draft_accepted") or 0) for s in probe.info)
    assert rejected > 0, name

    lookup = load(target, "prompt-lookup")
    for i, text in enumerate(TURNS):
        assert ask(lookup, text, f"turn-{i}")[1].token_ids == expected[i], (name, i)

    # static batching: two prompts of different lengths in one left-padded batch
    prompts = [Prompt(id=f"b{i}", prompt=TURNS[i]) for i in (0, 1)]
    requests = [
        Request(prompt=p, input_ids=tuple(baseline.encode(p)), max_new_tokens=6, ignore_eos=True)
        for p in prompts
    ]
    outs = baseline.generate_batch(requests, [ListProbe(), ListProbe()])
    assert [len(o.token_ids) for o in outs] == [6, 6]
    assert outs[0].token_ids == expected[0][:6], name

    # the quality pass's scoring: a distribution per scored position
    ids = list(requests[1].input_ids) + expected[1]
    scores = baseline.score(ids, len(requests[1].input_ids))
    assert scores.logprobs.shape == (len(expected[1]), scores.logprobs.shape[1])
    assert torch.isfinite(torch.as_tensor(scores.logprobs)).all()

    # torchao int8: runs, or GPT-2's Conv1D layers are refused in one line
    if name == "gpt2":
        with pytest.raises(StrategyError, match=r"Conv1D.*torchao does not take"):
            load(target, "quantized", method="int8-weight-only")
    else:
        quantized = load(target, "quantized", method="int8-weight-only")
        _, out, _ = ask(quantized, TURNS[0], "q")
        assert len(out.token_ids) == 10
        assert quantized.score(ids, len(requests[1].input_ids)).logprobs.shape == scores.logprobs.shape


def test_a_sliding_window_layer_holds_only_the_window_after_a_rollback(tmp_path):
    """The speculative loop's cache records the past only until the next crop: a sliding layer is
    back to ``window - 1`` positions after each cut, not growing with the sequence."""
    from workbench_strategies._kv import crop_cache, new_cache

    folder = build_tiny_model(tmp_path / "g", family="gemma3")
    session = load(folder, "baseline")
    model = session.hf.model
    cache = new_cache(model, rollback=True)
    ids = torch.tensor([list(range(5, 45))])
    with torch.inference_mode():
        model(input_ids=ids, past_key_values=cache, use_cache=True)
        crop_cache(cache, 37)
    sliding = [layer for layer in cache.layers if getattr(layer, "is_sliding", False)]
    assert sliding and all(layer.keys.shape[-2] == TINY_SLIDING_WINDOW - 1 for layer in sliding)
    assert cache.get_seq_length() == 37


def test_the_onnx_runtime_genai_builder_s_list_refuses_what_it_cannot_build(family):
    """The builder has no graph for some families (GPT-2, OLMo 2 in onnxruntime-genai 0.18): the
    strategy refuses them in one line before spending a build; the others pass the check."""
    pytest.importorskip("onnxruntime_genai")
    from workbench_strategies.ort_genai import builder_architectures, check_architecture

    name, target, _ = family
    if not builder_architectures():
        pytest.skip("this onnxruntime-genai's builder lists no architectures")
    architecture = {"gpt2": "GPT2LMHeadModel", "olmo2": "Olmo2ForCausalLM"}.get(name)
    if architecture is None or architecture in builder_architectures():
        check_architecture(target)  # no refusal
        return
    with pytest.raises(StrategyError, match=f"has no graph for {architecture}"):
        load(target, "onnxruntime-genai", dtype="auto")
