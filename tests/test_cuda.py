"""The CUDA paths, on a GPU (every test here is skipped without one; `scripts/gpu_check.sh` runs them
after its comparison on random-weight models; docs/ci.md "The GPU check"). What CPU CI cannot exercise: the runner's device-synchronized clock
and allocator-peak memory on CUDA, bf16 by default, speculative decoding and prompt lookup lossless on
the GPU, the draft's KV cache left in its own dtype there, and the quantization kernels that exist."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from workbench.core.device import Device, resolve_device  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.testing.helpers import load_session, tiny_prompt, trial_plan  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]

SPEC = "workbench_strategies.speculative:SpeculativeStrategy"
PLD = "workbench_strategies.prompt_lookup:PromptLookupStrategy"


def run(session, prompt: str, n: int = 24):
    result = TrialRunner(session, Device("cuda", 0)).run(trial_plan(prompt, n, ignore_eos=True))
    assert result.status == "ok", result.record.error
    return result


def test_auto_device_and_dtype_on_cuda():
    from workbench_strategies._hf import resolve_dtype

    device = resolve_device("auto")
    assert device.type == "cuda"
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    assert resolve_dtype("auto", device) == expected


def test_baseline_trial_on_cuda_is_timed_and_measured(tiny_model_dir):
    session = load_session(tiny_model_dir, "baseline", device="cuda:0")
    assert next(session.hf.model.parameters()).is_cuda
    row = run(session, tiny_prompt(40)).record
    assert row.output_tokens == 24
    assert 0 < row.ttft_ms < row.e2e_ms
    assert row.peak_memory_mb > 0  # the CUDA allocator's peak


@pytest.mark.parametrize(
    ("strategy", "params"),
    [
        (SPEC, {"draft": "SELF", "draft_dtype": "float16", "num_draft_tokens": 4}),
        (SPEC, {"draft": "SELF", "num_draft_tokens": 3, "adaptive": False}),
        (PLD, {}),
    ],
)
def test_speculative_paths_are_lossless_on_cuda(tiny_model_dir, strategy, params):
    params = {k: (str(tiny_model_dir) if v == "SELF" else v) for k, v in params.items()}
    base = load_session(tiny_model_dir, "baseline", device="cuda:0")
    spec = load_session(tiny_model_dir, strategy, device="cuda:0", **params)
    for start in (0, 3):
        prompt = tiny_prompt(30, start) + " " + tiny_prompt(30, start)  # repeats: prompt lookup finds drafts
        want = run(base, prompt).record.output_token_ids
        got = run(spec, prompt)
        assert got.record.output_token_ids == want
        assert got.record.draft_tokens_proposed >= got.record.draft_tokens_accepted >= 0
    if strategy == SPEC and params.get("draft_dtype") == "float16":
        # on a GPU half-precision attention is native: the draft's cache stays in its own dtype
        assert spec.drafter.cache.layers[0].keys.dtype == torch.float16
        assert spec.hf.model.config._attn_implementation == "sdpa"  # CPU kernels are for CPUs


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes not installed")
def test_bitsandbytes_nf4_on_cuda(tiny_model_dir):
    session = load_session(tiny_model_dir, "quantized", device="cuda:0", method="bnb-nf4")
    assert run(session, tiny_prompt(20)).record.output_tokens == 24


@pytest.mark.skipif(
    importlib.util.find_spec("gptqmodel") is None, reason="GPTQModel not installed (make gptq)"
)
def test_gptq_quantize_on_load_on_cuda(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    session = load_session(
        tiny_model_dir, "quantized", device="cuda:0", method="gptq", group_size=32, calibration_samples=4
    )
    assert run(session, tiny_prompt(20)).record.output_tokens == 24
