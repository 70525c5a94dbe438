"""Quality beside speed: the scoring hook, the per-position figures, the quality pass of a real run
(tiny random llama, real worker processes, a real SQLite file) and how it is shown."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from workbench.analysis.quality import position_figures, quality_summary, reference_rows
from workbench.analysis.stats import Estimate
from workbench.core.strategy import TokenScores
from workbench.report.targets import check_text, verdict_short
from workbench.spec.parse import SpecError, parse_spec
from workbench.store import Store
from workbench.store.loaded import QualityPositionRecord
from workbench.testing.helpers import ListProbe, load_session, request_for, tiny_prompt

pytestmark = pytest.mark.usefixtures("one_thread")


def _logprobs(rows):
    return TokenScores.from_logits(np.asarray(rows, dtype=np.float64)).logprobs


# -- the figures of one position ---------------------------------------------------------------------


def test_kld_of_identical_distributions_is_zero_and_same_top_holds():
    lp = _logprobs(np.random.default_rng(0).normal(size=(5, 40)))
    f = position_figures({"logprobs": lp}, {"logprobs": lp.copy()}, [1, 2, 3, 4, 5])
    assert f["kld"].tolist() == [0.0] * 5
    assert f["same_top"].tolist() == [1] * 5
    assert np.allclose(f["delta_p"], 0) and np.allclose(f["nll"], f["nll_base"])


def test_kld_matches_a_hand_computed_two_token_case():
    p, q = np.array([[0.75, 0.25]]), np.array([[0.5, 0.5]])
    f = position_figures({"logprobs": np.log(p)}, {"logprobs": np.log(q)}, [1])
    expected = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert f["kld"][0] == pytest.approx(expected, rel=1e-6)
    assert f["delta_p"][0] == pytest.approx(0.5 - 0.25)
    assert f["nll"][0] == pytest.approx(-math.log(0.5)) and f["nll_base"][0] == pytest.approx(-math.log(0.25))
    assert f["same_top"][0] == 1  # a tie ranks the first token first, as p does
    f = position_figures({"logprobs": np.log(p)}, {"logprobs": np.log([[0.4, 0.6]])}, [1])
    assert f["same_top"][0] == 0 and f["top_id"][0] == 1


def test_a_servers_top_k_gives_a_lower_bound_of_the_full_kld():
    rng = np.random.default_rng(1)
    base = _logprobs(rng.normal(size=(6, 50)) * 2)
    mine = _logprobs(rng.normal(size=(6, 50)) * 2)
    tokens = [3, 7, 11, 2, 9, 0]
    full = position_figures({"logprobs": base}, {"logprobs": mine}, tokens)
    top = np.argsort(-mine, axis=1)[:, :8]
    sparse = {
        "top_ids": top,
        "top_logprobs": np.take_along_axis(mine, top, axis=1),
        "token_logprobs": mine[np.arange(6), tokens],
    }
    bound = position_figures({"logprobs": base}, sparse, tokens)
    assert bound["method"] == "top-k"
    assert (bound["kld"] <= full["kld"] + 1e-9).all() and (bound["kld"] > 0).all()
    assert np.allclose(bound["nll"], full["nll"]) and (bound["same_top"] == full["same_top"]).all()


def test_the_reference_keeps_the_top_k_compactly():
    lp = _logprobs(np.random.default_rng(2).normal(size=(3, 100)))
    rows = reference_rows({"logprobs": lp}, [5, 6, 7], k=10)
    ids = np.frombuffer(rows[0]["top_ids"], dtype="<i4")
    values = np.frombuffer(rows[0]["top_logprobs"], dtype="<f4")
    assert len(ids) == 10 and ids[0] == int(np.argmax(lp[0]))
    assert (np.diff(values) <= 0).all()  # best first
    assert rows[1]["logprob"] == pytest.approx(float(lp[1, 6]))


def test_the_summary_bootstraps_over_prompts_and_finds_the_first_divergence():
    rows = []
    for prompt, klds in {"a": [0.0, 0.1, 0.2], "b": [0.0, 0.0, 0.3], "c": [0.05, 0.05, 0.05]}.items():
        for i, k in enumerate(klds):
            rows.append(
                QualityPositionRecord(
                    variant="v",
                    source="output",
                    workload="chat" if prompt != "c" else "code",
                    prompt_id=prompt,
                    position=10 + i,
                    kld=k,
                    delta_p=-k / 2,
                    same_top=int(k < 0.15),
                    nll=1 + k,
                    nll_base=1.0,
                )
            )
    figures = {(f.workload): f for f in quality_summary(rows)}
    overall = figures[None]
    assert overall.positions == 9 and overall.prompts == 3
    assert overall.kld_mean == pytest.approx(0.75 / 9)
    assert overall.kld_ci is not None and overall.kld_ci[0] <= overall.kld_mean <= overall.kld_ci[1]
    assert overall.same_top == pytest.approx(7 / 9)
    assert overall.ppl_ratio == pytest.approx(math.exp(0.75 / 9))
    assert figures["chat"].first_divergence == pytest.approx(2)  # both chat prompts diverge at index 2
    assert figures["code"].first_divergence is None
    assert quality_summary(rows)[0].to_dict() == quality_summary(rows)[0].to_dict()  # fixed seed


# -- the hook on a transformers model -----------------------------------------------------------------


def test_baseline_scores_are_the_distributions_its_greedy_decode_follows(tiny_model_dir):
    session = load_session(tiny_model_dir, "baseline")
    request = request_for(session, tiny_prompt(20), max_new_tokens=10, ignore_eos=True)
    out = session.generate(request, ListProbe())
    stream = list(request.input_ids) + out.token_ids
    scores = session.score(stream, len(request.input_ids))
    assert scores.full and scores.logprobs.shape == (10, scores.logprobs.shape[1])
    assert np.argmax(scores.logprobs, axis=1).tolist() == out.token_ids
    assert np.allclose(np.exp(scores.logprobs).sum(axis=1), 1, atol=1e-5)
    again = session.generate(request, ListProbe())  # scoring kept no state
    assert again.token_ids == out.token_ids


def test_context_trim_says_which_prompt_it_sends_and_scores_under_it(tiny_model_dir):
    """A prompt-changing lever: the quality pass scores the baseline's answer under the prompt the
    variant sends (``sent_prompt``), with the same model, so the figures are the cut context's cost."""
    session = load_session(tiny_model_dir, "context-trim", max_input_tokens=8, policy="middle")
    request = request_for(session, "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12", max_new_tokens=4)
    sent = session.sent_prompt(request)
    assert len(sent) == 8 and sent == session.trim(request)
    baseline = load_session(tiny_model_dir, "baseline")
    assert baseline.sent_prompt(request) is None  # the prompt as given


# -- the pass in a real run --------------------------------------------------------------------------

_SPEC = """
name = "quality"
repetitions = 1
warmup = 0
{top}
[[variants]]
name = "baseline"
model = "{model}"
dtype = "float32"
{variants}
[[workloads]]
name = "code"
max_new_tokens = 8
ignore_eos = true
prompts = ["w1 w2 w3 w4 w5 w6 the a of", "w7 w8 w9 the a of and to w10"]
{targets}
"""


def _run(db_path, spec_text):
    from workbench.run.execute import RunExecutor

    with Store(db_path) as store:
        result = RunExecutor(parse_spec(spec_text), store).run()
        assert result.status == "ok", result.errors
        return (
            {r["variant"]: r for r in store.quality_variants(result.run_id)},
            store.quality_positions(result.run_id),
            store.query("select * from quality_reference where run_id = ?", [result.run_id]),
        )


@pytest.fixture(scope="module")
def quality_run(tiny_model_dir, tmp_path_factory):
    """One real run: the fp32 baseline, a bf16 copy (lossy), prompt lookup (lossless), context trim
    (scored under its trimmed prompt) and an identical copy of the baseline, with a held-out text of
    two chunks."""
    folder = tmp_path_factory.mktemp("quality-run")
    text = folder / "held-out.txt"
    text.write_text(" ".join(f"w{i % 50}" for i in range(70)), encoding="utf-8")
    m = tiny_model_dir
    variants = f"""
[[variants]]
name = "bf16"
model = "{m}"
dtype = "bfloat16"
[[variants]]
name = "lookup"
model = "{m}"
strategy = "prompt-lookup"
dtype = "float32"
[[variants]]
name = "trim"
model = "{m}"
strategy = "context-trim"
max_input_tokens = 8
dtype = "float32"
[[variants]]
name = "copy"
model = "{m}"
dtype = "float32"
"""
    db = folder / "results.db"
    top = f'quality_text = "{text}"\nquality_ctx = 32'
    targets = "targets = {kld_max = 1e-12, same_top_min = 0.5, e2e_ms = 100000}"
    outcome, positions, reference = _run(
        db, _SPEC.format(model=m, variants=variants, top=top, targets=targets)
    )
    return db, outcome, positions, reference


def test_a_run_scores_its_lossy_variants_and_records_why_others_are_not(quality_run):
    db, outcome, positions, reference = quality_run
    outputs = [p for p in positions if p["source"] == "output"]
    assert outcome["baseline"]["status"] == "reference" and outcome["baseline"]["method"] == "full"
    assert outcome["bf16"]["status"] == "scored" and outcome["bf16"]["method"] == "full"
    assert outcome["lookup"]["status"] == "lossless" and "by construction" in outcome["lookup"]["reason"]
    assert outcome["copy"]["status"] == "lossless" and "configuration" in outcome["copy"]["reason"]
    assert outcome["trim"]["status"] == "scored"
    # the lossless variants are checked (replayed, every position judged), not scored as lossy
    assert {p["variant"] for p in positions} == {"bf16", "trim"}
    assert outcome["lookup"]["checked"] == outcome["copy"]["checked"] == "replay"
    assert outcome["lookup"]["shape"].startswith("replayed: 2 prompt(s)")
    with Store(db) as store:
        checked = store.equivalence_positions(1)
    assert len(checked) == 32 and {p["variant"] for p in checked} == {"lookup", "copy"}
    assert all(p["verdict"] == "argmax" and p["own_kld"] < 1e-9 for p in checked)  # float32: the same
    trimmed = [p for p in outputs if p["variant"] == "trim"]
    outputs = [p for p in outputs if p["variant"] == "bf16"]
    assert len(outputs) == 16 and len(trimmed) == 16
    # the same answer tokens at the same positions, scored under the trimmed prompt: the cut moved them
    assert sorted((p["prompt_id"], p["position"]) for p in trimmed) == sorted(
        (p["prompt_id"], p["position"]) for p in outputs
    )
    assert sum(p["kld"] for p in trimmed) / 16 > sum(p["kld"] for p in outputs) / 16
    assert len([r for r in reference if r["source"] == "output"]) == 16  # 2 prompts × 8 output tokens
    # bf16 rounds the weights: a small, non-zero divergence
    assert 0 < sum(p["kld"] for p in outputs) / 16 < 0.05
    with Store(db) as store:
        trials = store.trials(1, status="ok")
    baseline = [json.loads(t.output_token_ids) for t in trials if t.variant == "baseline"]
    assert sorted(p["token_id"] for p in outputs) == sorted(t for output in baseline for t in output)


def test_a_scored_variants_nll_base_is_the_baselines_reference(quality_run):
    """The real model's side of the direction: every bf16 position's ``nll_base`` is the baseline's
    recorded log-probability of that token (``quality_reference``), and its ``nll`` is not."""
    _, _, positions, reference = quality_run
    logprob = {(r["source"], r["workload"], r["prompt_id"], r["position"]): r["logprob"] for r in reference}
    rows = [p for p in positions if p["variant"] == "bf16"]
    assert len(rows) == 16 + 30
    for p in rows:
        base = logprob[(p["source"], p["workload"], p["prompt_id"], p["position"])]
        assert p["nll_base"] == pytest.approx(-base, rel=1e-6, abs=1e-6)
    assert max(abs(p["nll"] - p["nll_base"]) for p in rows) > 1e-4  # bf16 rounds: the sides differ


def test_quality_text_is_scored_in_chunks_of_quality_ctx(quality_run):
    _, _, positions, _ = quality_run
    chunks = [p for p in positions if p["source"] == "text" and p["variant"] == "bf16"]
    assert {p["prompt_id"] for p in chunks} == {"chunk 0", "chunk 1"}  # 70 tokens: two whole chunks
    assert (
        len(chunks) == 2 * 15 and min(p["position"] for p in chunks) == 17
    )  # the second halves, as llama.cpp
    assert {p["workload"] for p in chunks} == {"held-out.txt"}


def test_show_prints_kld_and_same_top_beside_the_speed_ups(quality_run):
    from click.testing import CliRunner

    from workbench.cli import cli

    db = str(quality_run[0])
    shown = CliRunner().invoke(cli, ["show", "1", "--db", db])
    assert shown.exit_code == 0, shown.output
    header = next(
        line for line in shown.output.splitlines() if line.startswith("variant") and "e2e x" in line
    )
    assert header.split()[-2:] == ["match", "KLD"]  # the first-read columns; --wide adds same top
    wide = CliRunner().invoke(cli, ["show", "1", "--db", db, "--wide"]).output
    header = next(line for line in wide.splitlines() if line.startswith("variant") and "e2e x" in line)
    assert header.split()[-3:] == ["KLD", "same", "top"]
    assert "Quality vs the baseline" in shown.output and "held-out.txt (2 chunks, 30 tokens)" in shown.output
    as_json = json.loads(CliRunner().invoke(cli, ["show", "1", "--db", db, "--json"]).output)
    row = next(r for r in as_json["summary"] if r["variant"] == "bf16")
    assert row["quality"]["status"] == "scored" and 0 <= row["quality"]["kld_mean"] < 0.05
    statuses = {v["variant"]: v["status"] for v in as_json["quality"]["variants"]}
    assert statuses == {
        "baseline": "reference",
        "bf16": "scored",
        "lookup": "lossless",
        "trim": "scored",
        "copy": "lossless",
    }


def test_quality_targets_judge_the_variants_on_the_quality_pass(quality_run):
    from workbench.analysis.run import analyze_run

    with Store(quality_run[0], create=False) as store:
        analysis = analyze_run(store.load_run(1))
    verdicts = {v.variant: v for v in analysis.verdicts}
    # bf16 drifts from the baseline (KLD > 1e-12): missed, and no request of it is good enough
    bf16 = {c.metric: c for c in verdicts["bf16"].checks}
    assert bf16["kld_max"].status == "missed" and bf16["e2e_ms"].status == "met"
    assert verdicts["bf16"].goodput == 0
    # the baseline and the lossless variants keep its predictions by definition
    for name in ("baseline", "lookup", "copy"):
        assert verdicts[name].status == "met", verdict_short(verdicts[name])
        assert verdicts[name].goodput == 1
    # context trim is scored under its trimmed prompt: the cut context moved the answer's distribution
    trim = {c.metric: c for c in verdicts["trim"].checks}
    assert trim["kld_max"].status == "missed" and verdicts["trim"].goodput == 0
    # a variant the pass did not score: no data, said so (it cannot be judged)
    unscored = dataclasses.replace(trim["kld_max"], measured=Estimate(None))
    assert unscored.status == "no data"
    assert "the quality pass did not score" in check_text(unscored)
    assert check_text(bf16["same_top_min"]).startswith("same top ")


def test_quality_targets_are_checked_in_the_spec():
    base = '[[variants]]\nname = "a"\nstrategy = "fake"\n[[workloads]]\nname = "code"\n'
    spec = parse_spec(base + "targets = {kld_max = 0.05, same_top_min = 0.9}\n")
    assert spec.workloads[0].targets.describe() == "KLD ≤ 0.05 nats, same top ≥ 90% at p90"
    with pytest.raises(SpecError, match="same_top_min' is a share of tokens from 0 to 1"):
        parse_spec(base + "targets = {same_top_min = 90}\n")


_FAKE = """
name = "fake quality"
repetitions = 1
warmup = 0
{top}
[[variants]]
name = "baseline"
strategy = "fake"
[[variants]]
name = "other"
strategy = "fake"
{other}
[[workloads]]
name = "code"
limit = 1
max_new_tokens = 4
"""


def test_the_pass_runs_only_when_some_variant_is_lossy_and_says_when_it_cannot_score(db_path):
    # an identical copy only: nothing lossy, no pass
    assert _run(db_path, _FAKE.format(top="", other=""))[0] == {}
    # lossy but turned off
    assert _run(db_path, _FAKE.format(top="quality = false", other="decode_ms_per_token = 2"))[0] == {}
    # lossy: the pass runs; the fake strategy has no scoring hook, so the baseline cannot be the reference
    outcome, positions, _ = _run(db_path, _FAKE.format(top="", other="decode_ms_per_token = 2"))
    assert outcome["baseline"]["status"] == "not scored" and "cannot score" in outcome["baseline"]["reason"]
    assert positions == []


_KNOWN = """
name = "known scores"
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
strategy = "tests.quality_helpers:KnownScoresStrategy"
prefill_ms = 0
decode_ms_per_token = 0
peak = 6.0
[[variants]]
name = "tilted"
strategy = "tests.quality_helpers:KnownScoresStrategy"
prefill_ms = 0
decode_ms_per_token = 0
peak = 2.0
rival = 4.0
[[variants]]
name = "retokenized"
strategy = "tests.quality_helpers:KnownScoresStrategy"
prefill_ms = 0
decode_ms_per_token = 0
peak = 6.0
shift = 1
[[workloads]]
name = "code"
limit = 2
max_new_tokens = 4
"""


@pytest.fixture(scope="module")
def known_run(tmp_path_factory):
    """A run of a fake whose scores are known by hand (tests/quality_helpers.py): the baseline puts
    most of its mass on each given token, ``tilted`` ranks the token after it first, ``retokenized``
    is the baseline's scores behind another tokenizer."""
    db = tmp_path_factory.mktemp("known-scores") / "results.db"
    outcome, positions, _ = _run(db, _KNOWN)
    with Store(db) as store:
        outputs = [
            json.loads(t.output_token_ids) for t in store.trials(1, status="ok") if t.variant == "baseline"
        ]
    return outcome, positions, outputs


def test_the_kld_is_of_the_variant_against_the_baseline_as_documented(known_run):
    """docs/metrics.md: ``kld`` = KL(P_baseline ‖ P_variant), ``delta_p`` = p_v − p_b, ``nll_base`` of
    the baseline, ``top_id`` the variant's most likely token: each figure from its own side."""
    from tests.quality_helpers import known_logits

    outcome, positions, outputs = known_run
    assert outcome["baseline"]["status"] == "reference" and outcome["tilted"]["status"] == "scored"
    rows = [p for p in positions if p["variant"] == "tilted"]
    assert len(rows) == 8 and sorted(p["token_id"] for p in rows) == sorted(t for o in outputs for t in o)
    for row in rows:
        token = row["token_id"]
        lb = _logprobs([known_logits(token, 6.0, 0.0)]).astype(np.float64)[0]
        lv = _logprobs([known_logits(token, 2.0, 4.0)]).astype(np.float64)[0]
        forward = float((np.exp(lb) * (lb - lv)).sum())  # KL(baseline ‖ variant)
        backward = float((np.exp(lv) * (lv - lb)).sum())
        assert abs(forward - backward) > 0.5  # the direction shows (≈ 2.13 against ≈ 2.85 nats)
        assert row["kld"] == pytest.approx(forward, rel=1e-5)
        assert row["nll_base"] == pytest.approx(-lb[token], rel=1e-5)
        assert row["nll"] == pytest.approx(-lv[token], rel=1e-5)
        assert row["delta_p"] == pytest.approx(math.exp(lv[token]) - math.exp(lb[token]), rel=1e-5)
        assert row["delta_p"] < 0  # the variant gives the answer's token less than the baseline did
        assert row["same_top"] == 0 and row["top_id"] == (token + 1) % 64


def test_a_variant_that_encodes_the_prompts_differently_is_not_scored_and_says_why(known_run):
    outcome, positions, _ = known_run
    row = outcome["retokenized"]
    assert row["status"] == "not scored"
    assert row["reason"].startswith("its tokenizer encodes 2 prompt(s) differently from the baseline's (")
    assert row["reason"].endswith("): no position-by-position comparison")
    assert not [p for p in positions if p["variant"] == "retokenized"]


# -- the spec keys -------------------------------------------------------------------------------------


def test_a_long_prompt_is_scored_in_its_last_quality_ctx_tokens():
    from workbench.run.quality import scored_context

    prompt, output = list(range(100, 1346)), list(range(48))  # the demo's document, its summary
    tokens, start = scored_context(prompt, output, 512)
    assert (
        len(tokens) == 512 and start == 464 and tokens[:start] == prompt[-464:] and tokens[start:] == output
    )
    assert scored_context([1, 2, 3], [4, 5], 512) == ([1, 2, 3, 4, 5], 3)  # short: untouched
    tokens, start = scored_context(prompt, list(range(600)), 512)  # a long output keeps half a context
    assert start == 256 and len(tokens) == 856


def test_quality_keys_are_checked(tmp_path):
    base = '[[variants]]\nname = "a"\nstrategy = "fake"\n[[workloads]]\nname = "code"\n'
    assert parse_spec("quality = false\n" + base).quality is False
    assert parse_spec(base).quality is None
    with pytest.raises(SpecError, match="'quality' must be true or false"):
        parse_spec('quality = "yes"\n' + base)
    assert parse_spec("quality_ctx = 256\n" + base).quality_ctx == 256
    with pytest.raises(SpecError, match="'quality_text' file not found"):
        parse_spec('quality_text = "nope.txt"\n' + base, base_dir=tmp_path)
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpecError, match="not UTF-8"):
        parse_spec('quality_text = "bin.txt"\n' + base, base_dir=tmp_path)
    (tmp_path / "ok.txt").write_text("some words", encoding="utf-8")
    spec = parse_spec('quality_text = "ok.txt"\nquality_ctx = 64\n' + base, base_dir=tmp_path)
    assert spec.quality_text == tmp_path / "ok.txt" and spec.quality_ctx == 64
    with pytest.raises(SpecError, match="16 or more"):
        parse_spec('quality_text = "ok.txt"\nquality_ctx = 4\n' + base, base_dir=tmp_path)


def test_the_gui_shows_kld_columns_the_quality_tab_and_the_tradeoff(quality_run, qtbot, tmp_path):
    pytest.importorskip("PySide6")
    from workbench.gui import charts as gui_charts
    from workbench.gui.chartview import ChartPanel
    from workbench.gui.loading import load_results
    from workbench.gui.results import COLUMNS, SummaryTableModel
    from workbench.gui.results_view import advice_html

    data = load_results(quality_run[0], (1,))
    model = SummaryTableModel()
    model.set_summaries(data.summaries, {}, data.verdicts)
    headers = [header for header, _, _ in COLUMNS]
    kld, top = headers.index("KLD"), headers.index("same top")
    cells = {
        model.summary(r).variant: (model.index(r, kld).data(), model.index(r, top).data())
        for r in range(model.rowCount())
    }
    assert cells["baseline"] == ("reference", "") and cells["lookup"] == ("lossless", "")
    assert cells["bf16"][1].endswith("%") and cells["trim"][1].endswith("%")  # trim: under its cut prompt
    assert float(cells["bf16"][0]) > 0 and float(cells["trim"][0]) > 0
    html = advice_html(data)
    assert "Quality vs the baseline" in html and "bf16: decode" in html and "trim: " in html
    chart = next(c for c in data.charts if c.key == "quality")
    exact = [
        p for p in chart.points if p.metric == "e2e" and p.kld == 0
    ]  # the baseline and the lossless ones
    assert {p.variant for p in exact} == {"baseline", "lookup", "copy"}
    assert max(exact, key=lambda p: p.speedup).pareto  # the fastest exact one: nothing is closer, none faster
    panel = ChartPanel()
    qtbot.addWidget(panel)
    panel.set_charts(data.charts)
    panel.show_tab("quality")
    panel.draw_all()
    assert len(gui_charts.plot_items(panel.widgets["quality"])) == 2  # e2e and decode
    assert gui_charts.save_png(chart, tmp_path / "quality.png").stat().st_size > 5000


def test_the_pareto_front_keeps_only_undominated_points():
    from workbench.charts.quality import QualityPoint, pareto_front

    def point(speed, kld):
        return QualityPoint("w", f"v{speed}-{kld}", "e2e", speed, None, None, kld, None, None, None, "scored")

    points = [point(1.0, 0.0), point(2.0, 0.01), point(1.5, 0.02), point(3.0, 0.1), point(3.0, 0.2)]
    assert pareto_front(points) == {0, 1, 3}
