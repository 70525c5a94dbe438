"""transformers' assisted generation as a reference strategy: timed through the probe, greedy-lossless."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workbench.core import registry  # noqa: E402
from workbench.core.device import Device  # noqa: E402
from workbench.core.strategy import Prompt  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.testing.helpers import tiny_prompt, trial_plan  # noqa: E402


def load(model_dir, strategy, extra=""):
    spec = parse_spec(
        f'[[variants]]\nname = "v"\nmodel = "{model_dir}"\nstrategy = "{strategy}"\ndtype = "float32"\n{extra}'
        '[[workloads]]\nname = "code"\n'
    )
    v = spec.variants[0]
    return registry.get(v.strategy)().load(v, Device("cpu"))


def plan(text, max_new_tokens, **kw):
    return trial_plan(Prompt(id="p", prompt=text), max_new_tokens, **kw)


@pytest.fixture(scope="module")
def runners(tiny_model_dir):
    return {
        name: TrialRunner(load(tiny_model_dir, strategy, extra), Device("cpu"))
        for name, strategy, extra in [
            ("baseline", "baseline", ""),
            ("lookup", "hf-assisted", ""),
            ("self-draft", "hf-assisted", f'draft = "{tiny_model_dir}"\nnum_draft_tokens = 3\n'),
        ]
    }


@pytest.mark.parametrize("name", ["lookup", "self-draft"])
@pytest.mark.parametrize("text,max_new", [(" ".join([tiny_prompt(12, 3)] * 3), 30), (tiny_prompt(30, 5), 17)])
def test_greedy_output_equals_the_baseline_and_is_timed_by_the_runner(runners, name, text, max_new):
    reference = runners["baseline"].run(plan(text, max_new))
    result = runners[name].run(plan(text, max_new))
    assert result.status == "ok", result.record.error
    assert result.record.output_token_ids == reference.record.output_token_ids
    assert result.record.ttft_ms > 0
    assert sum(s["n_tokens"] for s in result.steps) == result.record.output_tokens


def test_self_draft_delivers_several_tokens_per_step(runners):
    result = runners["self-draft"].run(plan(tiny_prompt(20), 24, ignore_eos=True))
    assert result.status == "ok"
    assert result.record.output_tokens == 24
    assert max(s["n_tokens"] for s in result.steps) > 1
    assert len(result.steps) < 24
