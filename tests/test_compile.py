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


def _run(tmp_path, text):
    from workbench.run.execute import RunExecutor

    with Store(tmp_path / "r.db") as store:
        result = RunExecutor(parse_spec(text), store).run()
        assert result.status == "ok", result.errors
        return store.trials(result.run_id, include_warmup=True), store.variants(result.run_id)


def test_compile_ms_is_the_first_workers_cold_compile_and_the_fresh_workers_are_apart(tmp_path):
    """With a fresh worker per repetition, each compiles again (inductor's caches warm by then):
    ``compile_ms`` stays the first worker's cold compile (400 ms here), the fresh workers' median is
    ``recompile_ms`` (40 ms)."""
    trials, variants = _run(
        tmp_path,
        """
name = "cold"
repetitions = 3
warmup = 0
workers = "per-repetition"
[[variants]]
name = "base"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.5
[[variants]]
name = "compiled"
strategy = "tests.compile_helpers:ColdCompileStrategy"
compile = true
prefill_ms = 1
decode_ms_per_token = 0.5
[[workloads]]
name = "w"
max_new_tokens = 2
prompts = ["a b"]
""",
    )
    assert {t.worker for t in trials if t.variant == "compiled"} == {0, 1, 2}  # three processes
    compiled = next(v for v in variants if v["name"] == "compiled")
    assert 400 <= compiled["compile_ms"] < 2000, compiled["compile_ms"]
    assert 40 <= compiled["recompile_ms"] < 400, compiled["recompile_ms"]
    base = next(v for v in variants if v["name"] == "base")
    assert base["compile_ms"] is None and base["recompile_ms"] is None


def test_compile_ms_waits_for_the_device_to_finish_what_the_compile_queued():
    """A stand-in for a GPU (none here): ``prepare`` queues 300 ms of work and returns at once, as a
    CUDA compile's warm-up steps do; the device's synchronizer waits for it, and ``compile_ms`` holds
    it (without the synchronizer it would read about 0)."""
    import threading
    import time
    from types import SimpleNamespace

    from workbench.run.worker import _prepare
    from workbench.testing import FakeConfig, FakeSession

    queued: list[threading.Thread] = []

    class QueuingSession(FakeSession):
        def prepare(self, prompt_lengths, max_new_tokens):
            work = threading.Thread(target=time.sleep, args=(0.3,))
            work.start()
            queued.append(work)

    def synchronize():
        for work in queued:
            work.join()

    from workbench.strategy import Prompt

    trials = [SimpleNamespace(prompt=Prompt(id="p", prompt="a b c"), max_new_tokens=2)]
    compile_ms = _prepare(
        QueuingSession(FakeConfig()), SimpleNamespace(compile="default"), trials, synchronize
    )
    assert compile_ms is not None and compile_ms >= 300


def test_a_fallback_to_eager_or_a_cuda_graph_recorded_inside_a_trial_flags_it(tmp_path):
    """Two compiled stand-ins in one run (their workers load side by side). ``fallback``: dynamo's
    recompile limit (2 here) hit inside a measured trial, dynamo runs the frame eagerly from then on:
    that trial and the later ones of its worker are disturbed with the reason. ``rerecord``: a
    stand-in for ``reduce-overhead`` on a GPU: a trial that records a CUDA graph (announced as
    torch's CUDA-graph trees announce it) is disturbed; the trials that replay are not."""
    pytest.importorskip("torch")
    trials, _ = _run(
        tmp_path,
        """
name = "fallback"
repetitions = 1
warmup = 0
[[variants]]
name = "fallback"
strategy = "tests.compile_helpers:FallingBackStrategy"
compile = true
decode_ms_per_token = 1
[[variants]]
name = "rerecord"
strategy = "tests.compile_helpers:ReRecordingStrategy"
compile = "reduce-overhead"
decode_ms_per_token = 1
[[workloads]]
name = "w"
max_new_tokens = 2
prompts = ["a", "a b", "a b c", "a b c d"]
""",
    )
    # in the order they ran (the rounds are shuffled): prepare compiled the shortest prompt's length;
    # the first other length recompiles (graph 2 of 2), the second hits the limit
    ran = [t for t in trials if t.variant == "fallback"]  # stored as they arrived
    new = [i for i, t in enumerate(ran) if t.input_tokens != 1]
    assert ran[new[0]].recompiles == 1 and ran[new[0]].eager_fallbacks == 0
    for i, t in enumerate(ran):
        if i < new[1]:
            assert t.eager_fallbacks == 0 and "fell back" not in (t.disturbance or ""), t
        else:  # the trial that hit the limit, and every later one of its worker (eager from then on)
            assert t.eager_fallbacks == 1 and t.disturbed, t
            assert "torch.compile fell back to eager for 1 frame(s)" in t.disturbance
    assert all(t.cudagraph_records == 0 for t in ran)

    records = {t.prompt_id: t for t in trials if t.variant == "rerecord"}
    assert [records[p].cudagraph_records for p in ("p1", "p2", "p3", "p4")] == [0, 1, 0, 0], records
    assert records["p2"].disturbed and "CUDA graph(s) recorded while it ran" in records["p2"].disturbance
    assert "CUDA graph" not in (records["p1"].disturbance or "")
    assert all(t.eager_fallbacks == 0 and t.recompiles == 0 for t in records.values())


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
