"""``prompt-compression``: what may be dropped, how it is chosen, the strategy on tiny models (the
target as its own compressor, a truncated one, one with another tokenizer), and the runner's
``compress_ms`` inside the TTFT."""

from __future__ import annotations

import json

import pytest
from workbench_strategies.prompt_compression import (
    SHORT_CHARS,
    choose_kept,
    compressible_spans,
    prompt_parts,
    sentence_units,
)

from workbench.core.strategy import Prompt, Request

CONTEXT = "\n\n".join(" ".join(f"w{(7 * p + 3 * i) % 200}" for i in range(40)) + " ." for p in range(4))
SYSTEM = "you are a w1 w2 w3"
QUESTION = "w150 w151 w152 the w153"
RAG = Prompt(
    id="rag",
    messages=(
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": CONTEXT + "\n\n" + QUESTION},
    ),
)
#: a document of one paragraph, longer than SHORT_CHARS, its last sentence short
DOCUMENT = " ".join(f"The report's point number {i} is about the budget of the year." for i in range(12))


def _named(prompt, text):
    return [(p.name, text[p.start : p.end]) for p in prompt_parts(prompt, text)]


def test_an_instruction_then_a_document_in_one_message_compresses_the_document():
    """The common layout: one user message, an instruction paragraph, then the document (one
    paragraph). The document is the context, not the question: only its last sentence is kept."""
    content = "Summarise the following report in three sentences.\n\n" + DOCUMENT
    chat = Prompt(id="d", messages=({"role": "user", "content": content},))
    text = f"<|user|>\n{content}<|end|>\n<|assistant|>\n"
    parts = _named(chat, text)
    assert [name for name, _ in parts] == ["instruction", "context", "question"]
    assert parts[0][1] == "Summarise the following report in three sentences."
    assert parts[2][1] == "The report's point number 11 is about the budget of the year."
    (span,) = compressible_spans(chat, text)
    assert len(text[span[0] : span[1]]) > 0.9 * len(DOCUMENT)  # nearly all of the document
    # the same as a raw prompt
    assert [name for name, _ in _named(Prompt(id="r", prompt=content), content)] == [
        "instruction",
        "context",
        "question",
    ]


def test_the_question_is_a_short_last_paragraph_or_sentence_and_the_instruction_a_short_first():
    raw = "Context:\n\n" + CONTEXT + "\n\nQuestion: " + QUESTION + "?"
    parts = _named(Prompt(id="r", prompt=raw), raw)
    assert parts[0] == ("instruction", "Context:") and parts[-1] == ("question", f"Question: {QUESTION}?")
    assert parts[1][0] == "context" and CONTEXT in parts[1][1]
    # one paragraph: its first and last sentences, when short
    one = "Summarise this. " + DOCUMENT
    parts = _named(Prompt(id="o", prompt=one), one)
    assert parts[0] == ("instruction", "Summarise this.") and parts[-1][0] == "question"
    # a long first paragraph and a long last sentence are context
    long_sentence = " and ".join(["the budget grew"] * 40) + "."
    body = DOCUMENT + " " + long_sentence
    assert len(long_sentence) > SHORT_CHARS
    parts = _named(Prompt(id="l", prompt=body), body)
    assert [name for name, _ in parts] == ["instruction", "context"]
    # a prompt short as a whole is all question: nothing to drop
    short = "Summarise this.\n\nfirst part. second part.\n\nThe end."
    assert _named(Prompt(id="s", prompt=short), short) == [("question", short)]
    assert compressible_spans(Prompt(id="s", prompt=short), short) == []


def test_named_parts_keep_the_instruction_and_question_whatever_their_length():
    instruction = "Answer from the passages below. " * 20  # longer than SHORT_CHARS: kept all the same
    parts = (("instruction", instruction), ("context", CONTEXT), ("question", QUESTION))
    raw = "\n\n".join(t for _, t in parts)
    prompt = Prompt(id="f", prompt=raw, parts=parts)
    assert _named(prompt, raw) == [("instruction", instruction), ("context", CONTEXT), ("question", QUESTION)]
    assert [raw[a:b] for a, b in compressible_spans(prompt, raw)] == [CONTEXT]
    chat = Prompt(id="c", messages=({"role": "user", "content": raw},), parts=parts)
    text = f"<|user|>\n{raw}<|end|>"
    assert [text[a:b] for a, b in compressible_spans(chat, text)] == [CONTEXT]


def test_the_system_prompt_is_kept_and_earlier_turns_may_be_dropped():
    text = f"<|system|> {SYSTEM} <|user|> {CONTEXT}\n\n{QUESTION} <|assistant|> "
    parts = _named(RAG, text)
    assert [name for name, _ in parts] == ["system", "instruction", "context", "question"]
    first = CONTEXT.split("\n\n")[0]  # a short first paragraph reads as the instruction
    assert parts[0] == ("system", SYSTEM) and parts[1] == ("instruction", first)
    assert parts[2][1].strip() == CONTEXT[len(first) :].strip() and parts[3] == ("question", QUESTION)
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
    budget = load_session(tiny_model_dir, "prompt-compression", target_tokens=80)
    assert len(budget.sent_prompt(_request(budget))) == 80
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


def analysis_trials(analysis, variant):
    return [t for t in analysis.trials if t.variant == variant and analysis.design.disturbance.keeps(t)]


def _paragraphs(n, start):
    return "\\n\\n".join(" ".join(f"w{(start + 11 * p + 3 * i) % 200}" for i in range(30)) for p in range(n))


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
        # what it could not drop, per part: the raw prompt's first and last paragraphs (and a BOS)
        for t in trials:
            assert (
                {"instruction", "question"}
                <= set(json.loads(t.compress_protected))
                <= {
                    "template",
                    "instruction",
                    "question",
                }
            )
        quality = {r["variant"]: r for r in store.quality_variants(result.run_id)}
        assert quality["compressed"]["status"] == "scored"
        analysis = analyze_run(store.load_run(result.run_id))
    (b,) = analysis.compression
    # the 4 measured trials, less any the run flagged disturbed (left out of every statistic: on a
    # busy machine one may be, which the break-even must not count)
    kept = sum(analysis.design.disturbance.keeps(t) for t in trials)
    assert (b.variant, b.workload, b.trials) == ("compressed", "docs", kept) and kept >= 3
    assert 0.4 < b.achieved_rate <= 0.55 and b.requested_rate == 0.5
    assert b.prefill_ms_per_token is not None and b.over_budget == 0
    # paired with the baseline's trials of the same prompt and repetition, both kept
    baseline = {(t.prompt_id, t.repetition): t for t in analysis_trials(analysis, "baseline")}
    pairs = [
        t for t in trials if analysis.design.disturbance.keeps(t) and (t.prompt_id, t.repetition) in baseline
    ]
    assert b.pairs == len(pairs) and b.saved_ms is not None and b.lengths is not None
    assert b.lengths[0] < b.lengths[1]  # two prompt lengths: a break-even is computed, or why not
    assert (b.break_even is None) != (b.no_break_even is None)
    text = render_text(build_run_report(analysis), detail=True)
    section = text[text.index("Does prompt compression pay?") :]
    assert "compressed on docs: kept" in section and "pairs, measured" in section
    assert "of the prefill it saves" in section or "saved no prefill time" in section
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
