"""Planted faults, run for real: lossless strategies with a bug of a known kind and size
(tests/plugins/planted_faults.py, registered through the ``workbench.strategies`` entry point in a
``dist-info`` of their own, so that the run's worker processes load them like any plugin) run beside
the baseline and the honest strategies, and the run's quality pass must call each of them not
equivalent — after checking that the fault did change an output (a fault that changed nothing was
not caught, it was not there). The honest strategies: identical in float32, identical or equivalent
in bfloat16 (docs/metrics.md, "Equivalence").

The model: the tiny random llama of the other tests with its weights × 8 and its output layer × 16
more. The tiny model as built predicts nearly uniformly (its best token's log-probability ≈ −5.1,
uniform over its 222 tokens is −5.4; the gap between its two best ≈ 0.03 nats), so every fault and
every rounding flips near-ties and nothing tells them apart, a tolerance in nats means nothing, and
its attention is so flat that a position off by one moves a logit by 5e-4. Sharpened, its best token
is at −2.6 … −1.2 (10th-90th percentile) with a median gap of 0.36 nats to the runner-up, more like
a trained model, and every fault below changes some outputs (asserted). The draft: the target's first layer alone
(correlated with it, as a real draft is: it proposes the target's argmax often and a close runner-up
sometimes, so drafts are both accepted and rejected). A fixed draft length (3): the adaptive schedule
measures step times, so its choices, hence which tokens a fault touches, would vary between runs.

One run per dtype (module-scoped: every fault and honest variant beside one baseline, so the run's
cost is paid twice, not once per fault): five prompts for the speculative and the compiled variants,
a five-turn conversation for the prefix caches (a later turn's prompt extends the earlier one's, so
the cache reuses a prefix).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.spec.parse import parse_spec
from workbench.store import Store
from workbench.testing.helpers import build_tiny_model, tiny_prompt

pytestmark = pytest.mark.usefixtures("one_thread")

PLUGINS = Path(__file__).resolve().parent / "plugins"

_SPEC_KEYS = 'draft = "{draft}"\nnum_draft_tokens = 3\nschedule = "fixed"\n'
_PREFIX_KEYS = "min_prefix_tokens = 2\n"
_COMPILED_KEYS = 'compile = true\nbackend = "eager"\n'

#: the honest variants: name -> (strategy, keys)
HONEST = {
    "speculative": ("speculative", _SPEC_KEYS),
    "prefix-cache": ("prefix-cache", _PREFIX_KEYS),
    "compiled": ("planted-compiled", _COMPILED_KEYS + "nudge = 0\n"),
}
#: the planted faults: name -> (its honest variant, strategy, keys)
FAULTS = {
    "tolerance 0.1": ("speculative", "planted-tolerance", _SPEC_KEYS + "tolerance = 0.1\n"),
    "tolerance 0.3": ("speculative", "planted-tolerance", _SPEC_KEYS + "tolerance = 0.3\n"),
    "tolerance 1": ("speculative", "planted-tolerance", _SPEC_KEYS + "tolerance = 1.0\n"),
    "stale kv": ("speculative", "planted-stale-kv", _SPEC_KEYS),
    "position +1": ("speculative", "planted-position", _SPEC_KEYS),
    "prefix short": ("prefix-cache", "planted-prefix", _PREFIX_KEYS + 'fault = "short"\n'),
    # 1 % moves nothing on a two-layer model (measured: no output of the conversation changes)
    "prefix keys x0.95": (
        "prefix-cache",
        "planted-prefix",
        _PREFIX_KEYS + 'fault = "scaled"\nscale = 0.95\n',
    ),
    "compiled nudge": ("compiled", "planted-compiled", _COMPILED_KEYS + "nudge = 1.0\nstep = 2\n"),
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The plugins' distribution on this process's path and the workers' ``PYTHONPATH``; the registry
    forgets its entry points before and after (it caches them)."""
    from workbench.core import registry

    folder = tmp_path_factory.mktemp("planted-dist")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(PLUGINS))
        import planted_faults

        paths = planted_faults.write_distribution(folder)
        for path in reversed(paths):
            mp.syspath_prepend(path)
        mp.setenv("PYTHONPATH", os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]))
        registry._entry_points.cache_clear()
        try:
            yield
        finally:
            registry._entry_points.cache_clear()
    registry._entry_points.cache_clear()


@pytest.fixture(scope="module")
def sharp_models(tmp_path_factory):
    """The sharpened tiny llama and its one-layer draft (module docstring)."""
    pytest.importorskip("torch")
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    root = tmp_path_factory.mktemp("sharp")
    target, draft = root / "target", root / "draft"
    build_tiny_model(target)
    model = LlamaForCausalLM.from_pretrained(target)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "norm" not in name:
                weight.mul_(8.0)
        model.lm_head.weight.mul_(2.0)
    model.save_pretrained(target)
    model.model.layers = model.model.layers[:1]
    model.config.num_hidden_layers = 1
    model.save_pretrained(draft)
    AutoTokenizer.from_pretrained(target).save_pretrained(draft)
    return target, draft


def _spec(target: Path, draft: Path, dtype: str, chats: Path) -> str:
    def variant(name: str, strategy: str, keys: str) -> str:
        return (
            f'[[variants]]\nname = "{name}"\nstrategy = "{strategy}"\nmodel = "{target}"\n'
            f'dtype = "{dtype}"\ndevice = "cpu"\nthreads = 1\n{keys.format(draft=draft)}'
        )

    variants = [variant("baseline", "baseline", "")]
    variants += [variant(name, strategy, keys) for name, (strategy, keys) in HONEST.items()]
    variants += [variant(name, strategy, keys) for name, (_, strategy, keys) in FAULTS.items()]
    cached = ["prefix-cache", *(n for n, (honest, _, _) in FAULTS.items() if honest == "prefix-cache")]
    decoded = [n for n in [*HONEST, *FAULTS] if n not in cached]
    prompts = [tiny_prompt(10, start) for start in (0, 3, 11, 17, 29)]
    return (
        'name = "planted faults"\nrepetitions = 1\nwarmup = 0\n'
        "quality = true\n"  # float32 on the CPU skips the pass for lossless variants alone
        + "".join(variants)
        + f'[[workloads]]\nname = "chat"\nmax_new_tokens = 16\nignore_eos = true\nprompts = {json.dumps(prompts)}\n'
        f"variants = {json.dumps(['baseline', *decoded])}\n"
        f'[[workloads]]\nname = "talk"\nkind = "conversation"\nfile = "{chats}"\nmax_new_tokens = 8\n'
        f"ignore_eos = true\nvariants = {json.dumps(['baseline', *cached])}\n"
    )


_runs: dict[str, dict] = {}


@pytest.fixture
def planted_run(planted, sharp_models, tmp_path_factory):
    """``planted_run(dtype)``: the run of every variant in that dtype (made once per module), as its
    outputs (variant -> (workload, prompt) -> tokens) and its equivalence checks (variant ->
    :class:`~workbench.analysis.equivalence.Equivalence`)."""
    from workbench.analysis.run import analyze_run
    from workbench.run.execute import RunExecutor

    def get(dtype: str) -> dict:
        if dtype in _runs:
            return _runs[dtype]
        folder = tmp_path_factory.mktemp(f"planted-{dtype}")
        chats = folder / "chats.jsonl"
        turns = [tiny_prompt(8, 10 * k + 1) for k in range(5)]
        chats.write_text(json.dumps({"id": "c1", "system": tiny_prompt(6, 3), "turns": turns}) + "\n")
        spec = parse_spec(_spec(*sharp_models, dtype, chats))
        with Store(folder / "runs.db") as store:
            result = RunExecutor(spec, store).run()
            assert result.status == "ok", result.errors
            outputs: dict[str, dict] = {}
            for t in store.trials(result.run_id):
                assert t.status == "ok", (t.variant, t.error)
                if not t.warmup:
                    outputs.setdefault(t.variant, {})[(t.workload, t.prompt_id)] = json.loads(
                        t.output_token_ids
                    )
            analysis = analyze_run(store.load_run(result.run_id))
        assert analysis.equivalence is not None
        _runs[dtype] = {"outputs": outputs, "checks": dict(analysis.equivalence.variants)}
        return _runs[dtype]

    return get


def _words(check) -> str:
    from workbench.report.equivalence import equivalence_text

    divergences = [(d.prompt_id, d.index, d.gap, d.explained) for d in check.divergences]
    return f"{equivalence_text(check)}; divergences (prompt, index, gap, explained): {divergences}"


def _cases():
    for dtype in ("float32", "bfloat16"):
        for fault in FAULTS:
            yield pytest.param(fault, dtype, id=f"{fault}-{dtype}")


def test_the_plugins_are_registered_through_the_entry_point(planted):
    import planted_faults

    from workbench.core import registry

    for name, target in planted_faults.ENTRY_POINTS.items():
        assert name in registry.names()
        cls = registry.get(name)
        assert f"{cls.__module__}:{cls.__name__}" == target and cls.name == name
        assert cls.lossless  # checked for equivalence, not scored as lossy


def test_the_tolerance_widens_greedy_acceptance_and_nothing_else(planted):
    """At tolerance 0 the planted rule is the loop's own; a tolerance accepts a draft token exactly
    when its log-probability is within it of the argmax's, and the correction is the argmax."""
    torch = pytest.importorskip("torch")
    import planted_faults
    from workbench_strategies.speculative import loop
    from workbench_strategies.speculative.drafter import Draft

    class Greedy:
        greedy = True

    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        logits = torch.randn(4, 12, generator=generator)
        draft = Draft(torch.randint(0, 12, (3,), generator=generator).tolist())
        honest = loop._accept(logits, draft, Greedy())
        assert planted_faults.tolerant_accept(loop._accept, 0.0)(logits, draft, Greedy()) == honest
        tokens, accepted = planted_faults.tolerant_accept(loop._accept, 0.5)(logits, draft, Greedy())
        logprobs = logits.log_softmax(-1)
        gaps = [float(logprobs[i].max() - logprobs[i, t]) for i, t in enumerate(draft.tokens)]
        assert accepted >= honest[1]
        assert all(gap <= 0.5 for gap in gaps[:accepted])
        assert accepted == len(gaps) or gaps[accepted] > 0.5
        assert tokens == [*draft.tokens[:accepted], int(logits[accepted].argmax())]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "dtype"), list(_cases()))
def test_a_planted_fault_changes_an_output_and_is_not_called_equivalent(planted_run, fault, dtype):
    run = planted_run(dtype)
    honest = FAULTS[fault][0]
    mine, theirs = run["outputs"][fault], run["outputs"][honest]
    assert mine.keys() == theirs.keys()
    changed = [key for key in mine if mine[key] != theirs[key]]
    assert changed, f"{fault}: the fault changed no output of the honest {honest}'s: nothing to catch"
    check = run["checks"][fault]
    assert check.outputs == len(mine)
    assert check.status not in ("identical", "equivalent"), _words(check)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_honest_strategies_are_identical_in_float32_and_equivalent_in_bfloat16(planted_run, dtype):
    run = planted_run(dtype)
    for name in HONEST:
        check = run["checks"][name]
        assert check.outputs == len(run["outputs"][name])
        wanted = ("identical",) if dtype == "float32" else ("identical", "equivalent")
        assert check.status in wanted, (name, _words(check))
