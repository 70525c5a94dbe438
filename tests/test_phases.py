"""Phase classification, prediction before a run, and advice, on crafted trials with known answers."""

from __future__ import annotations

import pytest

from workbench.analysis.phases import (
    DECODE_HEAVY,
    PREFILL_HEAVY,
    CostModel,
    classify,
    measure_phases,
    predict_workload,
    typical_lengths,
)
from workbench.analysis.stats import fit_line
from workbench.analysis.summary import summarize
from workbench.charts.headline import phase_caption
from workbench.report.phases import advice
from workbench.spec.workloads import builtin_workload
from workbench.store import TrialRecord


def trial(variant, workload, prompt, ttft, after, *, rep=0, inp=1000, out=100, budget=100, strategy=""):
    """A measured trial whose prefill (TTFT) and post-first-token time are known."""
    return TrialRecord.from_row(
        {
            "variant": variant,
            "strategy": strategy,
            "workload": workload,
            "prompt_id": prompt,
            "repetition": rep,
            "warmup": 0,
            "status": "ok",
            "input_tokens": inp,
            "output_tokens": out,
            "max_new_tokens": budget,
            "ttft_ms": ttft,
            "e2e_ms": ttft + after,
            "decode_ms": after,
            "tpot_ms": after / (out - 1),
            "decode_tokens_per_s": (out - 1) / after * 1000,
            "matches_baseline": None,
        }
    )


def test_thresholds():
    assert classify(PREFILL_HEAVY) == "prefill-heavy"
    assert classify(0.9) == "prefill-heavy"
    assert classify(DECODE_HEAVY) == "decode-heavy"
    assert classify(0.1) == "decode-heavy"
    assert classify(0.5) == "balanced"
    assert classify(0.59) == "balanced" and classify(0.41) == "balanced"


def test_prediction_from_lengths_with_a_cost_model():
    model = CostModel(prefill_ms_per_token=0.1, decode_ms_per_token=10.0)
    # 2000 input tokens: 200 ms prefill; 21 output tokens: 200 ms decode → balanced at 50 %
    assert model.predict(2000, 21).prefill_share == pytest.approx(0.5)
    assert model.predict(2000, 21).label == "balanced"
    assert model.predict(8000, 21).label == "prefill-heavy"
    assert model.predict(100, 500).label == "decode-heavy"
    assert model.decode_to_prefill == pytest.approx(100)


def test_default_models_depend_on_the_device():
    cpu, gpu = CostModel.default("cpu"), CostModel.default("cuda:1")
    assert gpu.decode_to_prefill > cpu.decode_to_prefill  # GPUs prefill far more tokens per decode step
    assert CostModel.default("mps").decode_to_prefill == pytest.approx(40)
    assert CostModel.default("unknown") == cpu


def test_built_in_workloads_are_predicted_without_a_model():
    sweep = builtin_workload("sweep-input")
    assert typical_lengths(sweep) == (384.0, 32.0)  # exact: the sweep's prompts are cut to token counts
    assert predict_workload(builtin_workload("code"), device="cpu").label == "decode-heavy"
    assert predict_workload(builtin_workload("rag"), device="cpu").label == "prefill-heavy"
    assert predict_workload(builtin_workload("rag"), device="cuda").label == "decode-heavy"
    measured = CostModel(prefill_ms_per_token=1.0, decode_ms_per_token=1.0, measured=True)
    assert predict_workload(builtin_workload("summarise"), measured).label == "prefill-heavy"


def test_cost_model_fitted_from_trials_recovers_known_slopes():
    rows = [trial("b", "w", f"p{n}", 5 + 0.25 * n, 99 * 4.0, inp=n) for n in (100, 200, 400, 800)]
    model = CostModel.from_trials(rows)
    assert model.prefill_ms_per_token == pytest.approx(0.25)
    assert model.prefill_fixed_ms == pytest.approx(5)
    assert model.decode_ms_per_token == pytest.approx(4.0)
    # one input length only: TTFT / input tokens
    same = CostModel.from_trials([trial("b", "w", "p", 50, 100, inp=100)])
    assert same.prefill_ms_per_token == pytest.approx(0.5) and same.prefill_fixed_ms == 0
    assert CostModel.from_trials([]) is None
    assert fit_line([1, 1], [2, 3]) == (None, None)


def levers_run():
    """rag: 300 ms prefill, 100 ms after → prefill-heavy (75 %); chat: 100 / 300 → decode-heavy (25 %).
    'spec' halves the decode time, 'quant' makes everything 10 % slower."""
    rows = []
    for rep in range(4):
        jitter = rep * 0.5
        for workload, ttft, after, inp in (("rag", 300, 100, 3000), ("chat", 100, 300, 1000)):
            for prompt in ("a", "b"):
                kw = dict(rep=rep, inp=inp)
                rows.append(
                    trial("base", workload, prompt, ttft + jitter, after + jitter, strategy="baseline", **kw)
                )
                rows.append(
                    trial(
                        "spec",
                        workload,
                        prompt,
                        ttft + jitter,
                        after / 2 + jitter,
                        strategy="speculative",
                        **kw,
                    )
                )
                rows.append(
                    trial(
                        "quant",
                        workload,
                        prompt,
                        1.1 * ttft + jitter,
                        1.1 * after,
                        strategy="quantized",
                        **kw,
                    )
                )
    return rows


def test_measured_phase_labels_and_advice_cite_the_numbers():
    rows = levers_run()
    summaries = summarize(rows, "base")
    strategies = {"base": "baseline", "spec": "speculative", "quant": "quantized"}
    phases = {p.workload: p for p in measure_phases(summaries, rows, "base", strategies=strategies)}
    rag, chat = phases["rag"], phases["chat"]
    assert rag.variant == "base"
    assert rag.label == "prefill-heavy" and rag.prefill_share == pytest.approx(0.75, abs=0.01)
    assert chat.label == "decode-heavy" and chat.prefill_share == pytest.approx(0.25, abs=0.01)
    assert phase_caption(rag) == "prefill-heavy: prefill 75% of e2e"
    text = " ".join(advice(rag))
    assert "Prefill is 75% of e2e at 3,000 input tokens" in text
    assert "TTFT grows 0.1 ms per input token" in text  # (300 − 100) / (3000 − 1000)
    assert "prefix caching" in text and "compress the prompt" in text
    chat_text = " ".join(advice(chat))
    assert (
        "Decode is 75% of e2e" in chat_text and "speculative decoding" in chat_text and "batch" in chat_text
    )
    # which lever helped, by how much
    levers = {lever.variant: lever for lever in chat.levers}
    assert levers["spec"].lever == "speculative decoding" and levers["spec"].verdict == "faster"
    assert levers["quant"].verdict == "slower"
    assert "In this run, helped: spec (speculative decoding): e2e 1.60x" in chat_text
    assert "Slower here: quant (weight quantization): e2e 0.91x" in chat_text


def test_a_prediction_that_disagrees_is_a_finding():
    # 2000 input tokens, 400 allowed output tokens: the CPU default predicts decode-heavy (25 %)
    # ... but the model stops after 10 tokens and prefill is slow: measured prefill-heavy.
    rows = [
        trial("base", "w", p, 800, 50, rep=r, inp=2000, out=10, budget=400) for p in "ab" for r in range(3)
    ]
    (phase,) = measure_phases(summarize(rows, "base"), rows, "base")
    assert phase.prediction is not None and phase.prediction.label == "decode-heavy"
    assert phase.label == "prefill-heavy" and phase.disagrees
    finding = advice(phase)[-1]
    assert finding.startswith("Finding: predicted decode-heavy")
    assert "outputs stopped at a median 10 of 400 allowed tokens" in finding


def test_a_run_without_the_named_baseline_measures_its_first_variant():
    rows = [trial("only", "w", "a", 10, 90, rep=r) for r in range(2)]
    (phase,) = measure_phases(summarize(rows, None), rows, None)
    assert phase.variant == "only" and phase.label == "decode-heavy" and phase.levers == ()


# -- a strategy's lever is declared on its class ---------------------------------------------------

_LEVER_PLUGINS = """
from workbench.strategy import Strategy


class SlicedPrefill(Strategy):
    name = "sliced-prefill"
    lever = "sliced prefill"
    phase = "prefill"
    requires_model = False

    def load(self, variant, device):
        raise AssertionError("a test strategy: only its declared lever and phase are read, it never loads")


class Undeclared(Strategy):
    name = "undeclared"
    requires_model = False

    def load(self, variant, device):
        raise AssertionError("a test strategy: only its declared lever and phase are read, it never loads")
"""


@pytest.fixture
def lever_plugins(tmp_path, monkeypatch):
    """Two plugin strategies registered through the ``workbench.strategies`` entry point of a
    distribution on the path: one declares its lever and phase, one declares neither."""
    import sys

    from workbench.core import registry

    (tmp_path / "lever_plugins-0.1.dist-info").mkdir()
    (tmp_path / "lever_plugins.py").write_text(_LEVER_PLUGINS)
    (tmp_path / "lever_plugins-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lever-plugins\nVersion: 0.1\n"
    )
    (tmp_path / "lever_plugins-0.1.dist-info" / "entry_points.txt").write_text(
        "[workbench.strategies]\nsliced-prefill = lever_plugins:SlicedPrefill\n"
        "undeclared = lever_plugins:Undeclared\n"
    )
    from workbench.analysis.phases import declared_levers

    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    declared_levers.cache_clear()
    yield
    registry._entry_points.cache_clear()
    declared_levers.cache_clear()
    sys.modules.pop("lever_plugins", None)


@pytest.mark.usefixtures("lever_plugins")
def test_a_plugin_s_declared_lever_gets_advice_and_one_that_declares_none_gets_none():
    """'spec' halves the decode time of the decode-heavy chat workload. Run by a plugin that declares
    a prefill lever, the advice names its lever and notes that a prefill lever helped a decode-heavy
    workload; by a plugin that declares nothing, or one not installed here (an old run read without
    its plugin), it is named by its strategy, no phase is assumed, and nothing fails."""
    rows = levers_run()
    summaries = summarize(rows, "base")
    for strategy, lever, targets, noted in (
        ("sliced-prefill", "sliced prefill", "prefill", True),
        ("undeclared", "undeclared", "both", False),
        ("uninstalled-plugin", "uninstalled-plugin", "both", False),
    ):
        strategies = {"base": "baseline", "spec": strategy, "quant": "quantized"}
        phases = {p.workload: p for p in measure_phases(summaries, rows, "base", strategies=strategies)}
        chat = phases["chat"]
        levers = {x.variant: x for x in chat.levers}
        assert (levers["spec"].lever, levers["spec"].targets) == (lever, targets), strategy
        assert levers["quant"].lever == "weight quantization" and levers["quant"].targets == "decode"
        text = " ".join(advice(chat))
        assert f"In this run, helped: spec ({lever}): e2e 1.60x" in text
        assert ("spec targets prefill, yet it helped this decode-heavy workload" in text) is noted, strategy


def test_the_lever_table_keyed_by_names_is_gone_each_built_in_declares_its_own():
    from workbench.analysis import phases
    from workbench.analysis.phases import BATCHING, strategy_lever
    from workbench.core import registry

    assert not hasattr(phases, "LEVERS")
    levers = "quantized speculative prompt-lookup hf-assisted prefix-cache context-trim prompt-compression"
    names = [*levers.split(), "endpoint", "baseline"]
    declared = {name: (registry.get(name).lever, registry.get(name).phase) for name in names}
    assert declared["prefix-cache"] == ("KV-cache reuse", "prefill")
    assert declared["speculative"] == ("speculative decoding", "decode")
    assert all(lever and phase for lever, phase in declared.values())
    assert all(strategy_lever(name) == lever for name, lever in declared.items())
    # runtimes and the test double declare none; a batched variant is the batching lever
    assert strategy_lever("llama-cpp") == (None, None) and strategy_lever("fake") == (None, None)
    assert strategy_lever(BATCHING) == ("batching", "decode")
    # a stored name is looked up among the registered ones, never imported as a path
    assert strategy_lever("workbench.testing:FakeStrategy") == (None, None)


def test_a_strategy_declaring_an_unknown_phase_is_refused_where_it_is_defined():
    from workbench.strategy import Strategy

    with pytest.raises(TypeError, match="phase = 'prefil' is not one of prefill, decode, both"):

        class Typo(Strategy):
            name = "typo"
            lever = "a typo"
            phase = "prefil"

            def load(self, variant, device):
                raise AssertionError(
                    "a test strategy: only its declared lever and phase are read, it never loads"
                )
