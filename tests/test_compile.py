"""The ``compile`` variant key: the spec's rules, compiled greedy output identical to eager, the
compile time beside load_ms, and a recompile inside a measured trial flagged disturbed."""

import pytest

from workbench.core.errors import SpecError
from workbench.spec import parse_spec
from workbench.store import Store
from workbench.testing.helpers import ListProbe, load_session, request_for, tiny_prompt

pytestmark = pytest.mark.usefixtures("one_thread")


def _variant(keys, strategy="baseline"):
    return parse_spec(
        f'[[variants]]\nname = "v"\nmodel = "demo:smollm2-135m"\nstrategy = "{strategy}"\n{keys}\n'
        '[[workloads]]\nname = "chat"\n'
    )


def test_compile_is_false_true_or_a_mode_and_refused_in_one_line_where_it_does_not_apply():
    assert _variant("").variants[0].compile is None
    assert _variant("compile = false").variants[0].compile is None
    assert _variant("compile = true").variants[0].compile == "default"
    assert _variant('compile = "max-autotune"').variants[0].compile == "max-autotune"
    assert _variant('compile = "reduce-overhead"', "quantized").variants[0].compile == "reduce-overhead"
    assert _variant("compile = true").variants[0].to_dict()["compile"] == "default"
    with pytest.raises(SpecError, match="'compile' must be false, true or one of default, max-autotune"):
        _variant('compile = "fast"')
    with pytest.raises(SpecError, match=r"strategy 'speculative' is not compiled: its verify pass .* crops"):
        _variant('compile = true\ndraft = "demo:smollm2-135m"', "speculative")
    with pytest.raises(SpecError, match="strategy 'prefix-cache' is not compiled"):
        _variant("compile = true", "prefix-cache")
    with pytest.raises(SpecError, match="a batch is decoded eagerly"):
        _variant("compile = true\nbatch_size = 2")


@pytest.mark.slow
def test_compiled_greedy_decoding_matches_eager_in_float32(tiny_model_dir):
    """A static cache and a compiled decode step (inductor) give the eager baseline's tokens."""
    eager = load_session(tiny_model_dir, "baseline")
    compiled = load_session(tiny_model_dir, "baseline", compile=True)
    prompts = [tiny_prompt(12), tiny_prompt(20)]
    requests = [request_for(eager, p, max_new_tokens=12, ignore_eos=True) for p in prompts]
    compiled.prepare(sorted(len(r.input_ids) for r in requests), 12)
    from workbench_strategies._compiled import compiled_graphs

    graphs = compiled_graphs()
    for request in requests:
        want = eager.generate(request, ListProbe()).token_ids
        got = compiled.generate(request, ListProbe()).token_ids
        assert got == want and len(got) == 12
    assert compiled_graphs() == graphs  # prepare compiled every graph the trials use


def test_a_recompile_inside_a_measured_trial_is_flagged_disturbed(tmp_path):
    """The worker counts the graphs torch.compile compiles during each trial: a prompt length the
    warm-up did not see compiles one, and that trial is disturbed (its time includes compiling)."""
    pytest.importorskip("torch")
    from workbench.run.execute import RunExecutor

    spec = parse_spec(
        """
name = "recompile"
repetitions = 1
warmup = 0
[[variants]]
name = "compiled"
strategy = "tests.compile_helpers:RecompilingStrategy"
compile = true
decode_ms_per_token = 1
[[workloads]]
name = "w"
max_new_tokens = 3
prompts = ["a b", "a b c d e f"]
"""
    )
    with Store(tmp_path / "r.db") as store:
        result = RunExecutor(spec, store).run()
        assert result.status == "ok", result.errors
        trials = {t.prompt_id: t for t in store.trials(result.run_id) if not t.warmup}
        variant = store.variants(result.run_id)[0]
    short, long = sorted(trials.values(), key=lambda t: t.input_tokens)
    # (a loaded machine may disturb either by its CPU wait: only the compile reason is asserted)
    assert short.recompiles == 0 and "torch.compile" not in (short.disturbance or "")
    assert long.recompiles == 1 and long.disturbed
    assert "torch.compile compiled 1 graph(s) while it ran" in long.disturbance
    assert variant["compile"] == "default" and variant["compile_ms"] > 0


def test_the_roofline_names_compiling_as_the_lever_for_an_eager_gpu_variant_far_from_its_limit():
    from types import SimpleNamespace

    from workbench.analysis.roofline import RooflineRow
    from workbench.report.run_report import roofline_lines
    from workbench.store import VariantRecord

    def row(variant, tok_s):
        return RooflineRow(variant, "chat", tok_s, 100.0, 3000.0, 500.0, 1.0, 100.0)

    variants = (
        VariantRecord(name="eager", strategy="baseline", device="cuda:0"),
        VariantRecord(name="compiled", strategy="baseline", device="cuda:0", compile="default"),
        VariantRecord(name="near", strategy="quantized", device="cuda:0"),
        VariantRecord(name="spec", strategy="speculative", device="cuda:0"),
        VariantRecord(name="cpu", strategy="baseline", device="cpu"),
    )
    rows = (row("eager", 20.0), row("compiled", 30.0), row("near", 80.0), row("spec", 10.0), row("cpu", 20.0))
    lines = roofline_lines(SimpleNamespace(variants=variants, roofline=rows))
    by_name = {line.split()[0]: line for line in lines}
    assert set(by_name) == {"eager", "compiled", "cpu"}  # near its limit, or speculative: nothing to say
    assert (
        "20%" in by_name["eager"]
        and "compile = true (a static cache and a compiled step) is the lever" in by_name["eager"]
    )
    assert "overhead-bound even compiled (default)" in by_name["compiled"]
    assert "no kernel launches for compile = true to remove" in by_name["cpu"]
