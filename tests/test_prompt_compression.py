"""``prompt-compression``: what may be dropped, how it is chosen, the strategy on tiny models (the
target as its own compressor, a truncated one, one with another tokenizer), and the runner's
``compress_ms`` inside the TTFT."""

from __future__ import annotations

import pytest
from workbench_strategies.prompt_compression import choose_kept, compressible_spans, sentence_units

from workbench.core.strategy import Prompt, Request

CONTEXT = "\n\n".join(" ".join(f"w{(7 * p + 3 * i) % 200}" for i in range(14)) + " ." for p in range(4))
SYSTEM = "you are a w1 w2 w3"
QUESTION = "w150 w151 w152 the w153"
RAG = Prompt(
    id="rag",
    messages=(
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": CONTEXT + "\n\n" + QUESTION},
    ),
)


def test_the_instruction_system_prompt_and_question_are_never_droppable():
    raw = "Summarise this.\n\nfirst part. second part.\n\nthird part.\n\nThe end."
    (span,) = compressible_spans(Prompt(id="r", prompt=raw), raw)
    assert raw[span[0] : span[1]] == "first part. second part.\n\nthird part."
    assert compressible_spans(Prompt(id="r", prompt="one paragraph only"), "one paragraph only") == []
    text = f"<|system|> {SYSTEM} <|user|> {CONTEXT}\n\n{QUESTION} <|assistant|> "
    (span,) = compressible_spans(RAG, text)
    assert text[span[0] : span[1]] == CONTEXT  # not the system prompt, not the question
    chat = Prompt(
        id="c",
        messages=(
            {"role": "user", "content": "old question"},
            {"role": "assistant", "content": "old answer"},
            {"role": "user", "content": "new question"},
        ),
    )
    text = "U: old question A: old answer U: new question"
    assert [text[a:b] for a, b in compressible_spans(chat, text)] == ["old question", "old answer"]


def test_sentences_split_on_end_marks_and_line_breaks():
    text = "Alpha one. Beta two! Gamma?\nDelta"
    assert [text[a:b] for a, b in sentence_units(text, [(0, len(text))])] == [
        "Alpha one.",
        "Beta two!",
        "Gamma?",
        "Delta",
    ]


def test_the_least_informative_droppable_tokens_go_first():
    scores = [9.0, 1.0, 5.0, 0.5, 3.0, 0.1]
    droppable = [False, True, True, True, True, False]
    assert choose_kept(scores, droppable, budget=4) == [0, 2, 4, 5]  # 0.5 and 1.0 dropped; 0.1 is kept
    assert choose_kept(scores, droppable, budget=1) == [0, 5]  # as far as the droppable allow
    assert choose_kept(scores, droppable, budget=6) == list(range(6))
    # sentences: whole groups, the lowest mean first
    assert choose_kept(scores, droppable, budget=4, units=[[1, 2], [3, 4]]) == [0, 1, 2, 5]


# -- on tiny models -----------------------------------------------------------------------------------

torch = pytest.importorskip("torch")

from workbench.core.device import Device  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.testing.helpers import ListProbe, build_tiny_model, load_session, trial_plan  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _request(session, prompt=RAG, max_new_tokens=6):
    return Request(
        prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=max_new_tokens, ignore_eos=True
    )


def _contiguous(small, big):
    return any(list(big[i : i + len(small)]) == list(small) for i in range(len(big) - len(small) + 1))


def _subsequence(small, big):
    it = iter(big)
    return all(t in it for t in small)


def test_the_target_compresses_to_the_rate_keeping_the_protected_parts(tiny_model_dir):
    session = load_session(tiny_model_dir, "prompt-compression", rate=0.6)
    request = _request(session)
    sent = session.sent_prompt(request)
    n = len(request.input_ids)
    assert len(sent) == -(-6 * n // 10)  # ceil(0.6 n): enough droppable tokens to reach it
    assert _subsequence(sent, request.input_ids)
    tok = session.hf.tokenizer
    assert _subsequence(tok(SYSTEM, add_special_tokens=False)["input_ids"], sent[:12])
    assert sent[-6:] == list(request.input_ids[-6:])  # the question and the generation prompt
    probe = ListProbe()
    out = session.generate(request, probe)
    assert probe.marks == ["compress"] and probe.tokens == out.token_ids
    assert out.trimmed_tokens == n - len(sent) and out.compress_rate == pytest.approx(0.6, abs=0.02)
    # a prompt with nothing droppable is sent as it is
    plain = _request(session, Prompt(id="q", prompt=QUESTION))
    assert session.sent_prompt(plain) == list(plain.input_ids)


def test_a_token_budget_sentences_and_a_truncated_compressor(tiny_model_dir):
    budget = load_session(tiny_model_dir, "prompt-compression", target_tokens=40)
    assert len(budget.sent_prompt(_request(budget))) == 40
    sentences = load_session(tiny_model_dir, "prompt-compression", rate=0.6, granularity="sentence")
    request = _request(sentences)
    sent = sentences.sent_prompt(request)
    assert len(sent) <= -(-6 * len(request.input_ids) // 10)
    # each paragraph of the context is one sentence here: kept whole or dropped whole
    paragraphs = [
        sentences.hf.tokenizer(p, add_special_tokens=False)["input_ids"] for p in CONTEXT.split("\n\n")
    ]
    present = [_contiguous(p, sent) for p in paragraphs]
    assert 0 < present.count(True) < len(paragraphs)
    assert sum(len(p) for p, kept in zip(paragraphs, present, strict=True) if not kept) == len(
        request.input_ids
    ) - len(sent)
    truncated = load_session(tiny_model_dir, "prompt-compression", rate=0.6, compressor_layers=1)
    assert len(truncated.compressor.hf.model.model.layers) == 1
    request = _request(truncated)
    assert len(truncated.sent_prompt(request)) == -(-6 * len(request.input_ids) // 10)


def test_a_compressor_with_another_tokenizer_scores_through_characters(tiny_model_dir, tmp_path):
    other = build_tiny_model(tmp_path / "qwen2", family="qwen2")  # a byte-level tokenizer
    session = load_session(tiny_model_dir, "prompt-compression", rate=0.6, compressor=str(other))
    assert not session.same_tokenizer
    request = _request(session)
    sent = session.sent_prompt(request)
    assert len(sent) == -(-6 * len(request.input_ids) // 10) and _subsequence(sent, request.input_ids)


def test_the_runner_records_compress_ms_inside_the_ttft(tiny_model_dir):
    session = load_session(tiny_model_dir, "prompt-compression", rate=0.5)
    result = TrialRunner(session, Device("cpu")).run(
        trial_plan(prompt=RAG, max_new_tokens=4, ignore_eos=True)
    )
    record = result.record
    assert result.status == "ok", record.error
    assert 0 < record.compress_ms < record.ttft_ms
    assert record.compress_rate == 0.5 and record.trimmed_tokens > 0
    baseline = TrialRunner(load_session(tiny_model_dir, "baseline"), Device("cpu")).run(
        trial_plan(prompt=RAG, max_new_tokens=4, ignore_eos=True)
    )
    assert baseline.record.compress_ms is None and baseline.record.compress_rate is None


def _paragraphs(n, start):
    return "\\n\\n".join(" ".join(f"w{(start + 11 * p + 3 * i) % 200}" for i in range(12)) for p in range(n))


def test_a_run_records_compression_scores_it_and_weighs_its_break_even(tiny_model_dir, tmp_path):
    from workbench.analysis.run import analyze_run
    from workbench.report.model import render_text
    from workbench.report.run_report import build_run_report
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    prompts = ", ".join(f'"{_paragraphs(n, n)}"' for n in (4, 8))
    spec = f"""
name = "compression"
repetitions = 2
warmup = 1
[[variants]]
name = "baseline"
model = "{tiny_model_dir}"
dtype = "float32"
[[variants]]
name = "compressed"
model = "{tiny_model_dir}"
strategy = "prompt-compression"
rate = 0.5
dtype = "float32"
[[workloads]]
name = "docs"
max_new_tokens = 4
ignore_eos = true
prompts = [{prompts}]
"""
    with Store(tmp_path / "r.db") as store:
        result = RunExecutor(parse_spec(spec), store).run()
        assert result.status == "ok", result.errors
        trials = [t for t in store.trials(result.run_id) if t.variant == "compressed" and not t.warmup]
        assert all(t.compress_ms and 0 < t.compress_ms < t.ttft_ms for t in trials)
        assert all(t.compress_rate == 0.5 and t.trimmed_tokens for t in trials)
        quality = {r["variant"]: r for r in store.quality_variants(result.run_id)}
        assert quality["compressed"]["status"] == "scored"
        analysis = analyze_run(store, result.run_id)
    (b,) = analysis.compression
    # the 4 measured trials, less any the run flagged disturbed (left out of every statistic: on a
    # busy machine one may be, which the break-even must not count)
    kept = sum(analysis.design.disturbance.keeps(t) for t in trials)
    assert (b.variant, b.workload, b.trials) == ("compressed", "docs", kept) and kept >= 3
    assert 0.4 < b.achieved_rate <= 0.55 and b.requested_rate == 0.5
    assert b.prefill_ms_per_token is not None and b.cost_fraction is not None and b.cost_fraction > 0
    text = render_text(build_run_report(analysis), detail=True)
    section = text[text.index("Does prompt compression pay?") :]
    assert "compressed on docs: kept" in section and "of the prefill it saves" in section
    from workbench.report.data import run_data

    data = run_data(analysis)
    assert data["compression"][0]["variant"] == "compressed"
    assert data["compression_advice"][0].startswith("compressed on docs: kept 5")
    # the headline chart stacks the compression inside the compressed variant's prefill
    from workbench.charts import run_charts

    headline = next(c for c in run_charts(analysis) if c.key == "headline")
    bars = {bar.variant: bar for group in headline.groups for bar in group.bars}
    assert bars["compressed"].compress_ms == b.compress_ms <= bars["compressed"].prefill_ms
    assert bars["baseline"].compress_ms is None
    assert {r["variant"]: r["compress_ms"] for r in headline.rows()}["compressed"] == b.compress_ms
    pytest.importorskip("PySide6")
    from workbench.gui.charts import png_bytes

    assert png_bytes(headline, scale=1.0).startswith(b"\x89PNG")
