"""The ``endpoint`` strategy against a real local HTTP server (stdlib, streaming SSE in a thread).

Session-level tests run the real TrialRunner in this process; run-level tests go through the CLI,
the worker process and a real SQLite file.
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from click.testing import CliRunner

from workbench.cli import cli
from workbench.core import registry
from workbench.core.config import build_config
from workbench.core.device import Device
from workbench.core.errors import SpecError, StrategyError
from workbench.core.strategy import Prompt
from workbench.core.variant import Variant
from workbench.run.runner import TrialRunner
from workbench.spec.parse import parse_spec
from workbench.testing.fake_server import FakeOpenAIServer
from workbench.testing.helpers import closed_port_url, db_rows, trial_plan

EndpointStrategy = registry.get("endpoint")
CHAT = Prompt(id="chat", messages=({"role": "user", "content": "say something"},))


def session_for(server: FakeOpenAIServer, **params):
    config = build_config(EndpointStrategy.Config, {"base_url": server.base_url, **params}, where="v")
    return EndpointStrategy().load(Variant(name="v", strategy="endpoint", config=config), Device("cpu"))


def run_one(session, **plan):
    return TrialRunner(session, Device("cpu")).run(trial_plan(**plan))


def test_vllm_server_multi_token_chunks_are_counted_as_tokens_not_events(openai_server):
    openai_server.tokens_per_chunk = 3  # speculative decoding on the server: 1 + 2 accepted per step
    session = session_for(openai_server)
    assert session.server_info["server"] == "vllm"
    result = run_one(session, max_new_tokens=10)
    row = result.record
    assert result.status == "ok", row.error
    assert row.output_tokens == 10
    assert [s["n_tokens"] for s in result.steps] == [1, 3, 3, 3]  # 4 events, 10 tokens
    assert row.token_count_source == "server-token-ids"
    assert len(json.loads(row.output_token_ids)) == 10
    assert row.timing_scope == "client"
    assert row.peak_memory_mb is None  # the client's memory is not the model's
    # known costs: 20 ms prefill, 4 ms per token; the client cannot see a token before the server
    # sends it (lower bounds); upper bounds only catch hangs (fidelity: benchmarks/endpoint.py)
    assert 20 <= row.ttft_ms < 1000
    assert 20 + 9 * 4 <= row.e2e_ms < 2000
    body = openai_server.requests[-1]
    assert body["stream"] is True and body["stream_options"]["include_usage"] is True
    assert body["max_tokens"] == 10 and "prompt" in body  # a raw prompt goes to /completions


def test_chat_prompts_go_to_chat_completions_and_count_the_prompt_tokens(openai_server):
    session = session_for(openai_server)
    result = run_one(session, prompt=CHAT, max_new_tokens=5)
    assert result.status == "ok", result.record.error
    body = openai_server.requests[-1]
    assert body["messages"] == [{"role": "user", "content": "say something"}]
    # the server's own count (usage.prompt_tokens): the template's tokens + the message's
    assert result.record.input_tokens == len(openai_server.prompt_ids(body))
    assert result.record.output_tokens == 5


def test_generic_server_streams_text_and_usage_tokens_are_split_over_chunks(openai_server):
    openai_server.vllm = False  # no token ids, usage only in the final chunk
    openai_server.tokens_per_chunk = 4
    session = session_for(openai_server)
    assert session.server_info["server"] == "generic"
    result = run_one(session, max_new_tokens=13)
    assert result.status == "ok", result.record.error
    assert result.record.output_tokens == 13
    assert result.record.token_count_source == "usage+chars"
    assert [s["n_tokens"] for s in result.steps] == [1, 4, 4, 4]
    assert result.record.output_token_ids is None  # ids unknown: the text is kept
    assert result.record.output_text.split() == [f"t{i}" for i in _ids(openai_server, 13)]
    body = openai_server.requests[-1]
    assert "return_token_ids" not in body and "continuous_usage_stats" not in body["stream_options"]


def _ids(server, n):
    return server.output_ids(server.prompt_ids(server.requests[-1]), n, 0)


def test_without_usage_a_local_tokenizer_counts_and_splits_by_offsets(openai_server, tiny_model_dir):
    openai_server.vllm = False
    openai_server.honour_usage = False
    openai_server.tokens_per_chunk = 2
    session = session_for(openai_server, tokenizer=str(tiny_model_dir))
    result = run_one(session, max_new_tokens=7)
    assert result.status == "ok", result.record.error
    # the tiny tokenizer splits on whitespace: one token per " t123" word, as the server sent them
    assert result.record.output_tokens == 7
    assert result.record.token_count_source == "tokenizer"
    assert [s["n_tokens"] for s in result.steps] == [1, 2, 2, 2]


def test_without_usage_the_servers_tokenize_endpoint_counts(openai_server):
    openai_server.vllm = False
    openai_server.honour_usage = False
    result = run_one(session_for(openai_server), max_new_tokens=6)
    assert result.status == "ok", result.record.error
    assert result.record.output_tokens == 6
    assert result.record.token_count_source == "server-tokenize+chars"


def test_nothing_to_count_with_is_a_failed_trial_not_a_guess(openai_server):
    openai_server.vllm = False
    openai_server.honour_usage = False
    openai_server.serve_tokenize = False
    result = run_one(session_for(openai_server), max_new_tokens=4)
    assert result.status == "failed"
    assert "cannot count the generated tokens" in result.record.error


@pytest.mark.parametrize("vllm", [True, False])
def test_end_of_sequence_token_is_counted_in_its_own_final_chunk(openai_server, vllm):
    openai_server.vllm = vllm
    openai_server.eos_after = 3
    result = run_one(session_for(openai_server), max_new_tokens=10)
    assert result.status == "ok", result.record.error
    assert result.record.output_tokens == 4  # 3 + EOS, as the local baseline counts it
    assert result.record.finish_reason == "eos"
    assert len(result.steps) == 4 and result.steps[-1]["n_tokens"] == 1
    assert result.record.output_text.count(" t") == 3


def test_server_metrics_window_gives_server_ttft_and_speculative_acceptance(openai_server):
    openai_server.tokens_per_chunk = 3
    session = session_for(openai_server)
    before = session.server_snapshot()
    result = run_one(session, max_new_tokens=10)
    figures = session.server_figures(before, 1)
    assert figures["requests"] == 1
    assert 20 <= figures["ttft_ms"] <= result.record.ttft_ms  # the client's TTFT adds HTTP and the network
    assert figures["spec_drafts"] == 3
    assert figures["spec_draft_tokens"] == 6 and figures["spec_accepted_tokens"] == 6
    assert json.loads(figures["spec_accepted_per_pos"]) == [3, 3]
    assert figures["generation_tokens"] == 10
    assert "vllm:num_requests_running" not in figures.get("extra", {})  # a gauge has no delta


def test_a_server_without_metrics_still_runs(openai_server):
    openai_server.serve_metrics = False
    session = session_for(openai_server)
    assert session.server_snapshot() is None
    assert run_one(session, max_new_tokens=3).status == "ok"


def test_parallel_streams_are_each_timed_by_the_runner(openai_server):
    openai_server.prefill_ms = 30
    session = session_for(openai_server)
    runner = TrialRunner(session, Device("cpu"))
    plans = [
        trial_plan(prompt=Prompt(id=f"p{i}", prompt=f"w{i} w{i + 1}"), max_new_tokens=8) for i in range(8)
    ]
    results = {}
    t0 = time.perf_counter()
    runner.run_group(plans, 4, lambda i, r: results.__setitem__(i, r), group=0)
    wall_ms = (time.perf_counter() - t0) * 1000
    assert sorted(results) == list(range(8))
    assert all(r.status == "ok" for r in results.values())
    assert openai_server.max_in_flight == 4
    rows = [r.record for r in results.values()]
    assert {r.concurrency for r in rows} == {4} and {r.concurrent_group for r in rows} == {0}
    # each stream is timed from its own start: the server's per-request cost, not the group's
    for r in rows:
        assert r.ttft_ms >= 30 and 30 + 7 * 4 <= r.e2e_ms < 1000
    offsets = sorted(r.group_offset_ms for r in rows)
    assert offsets[4] >= 30 + 7 * 4  # the fifth stream starts when one of the first four has finished
    assert offsets[3] < offsets[4]
    assert wall_ms < 8 * (30 + 7 * 4)  # parallel: well under eight requests in a row


@pytest.mark.parametrize(
    ("setup", "params", "needle"),
    [
        (lambda s: setattr(s, "fail", (500, "engine exploded")), {}, "HTTP 500"),
        (lambda s: setattr(s, "fail", (400, "max_tokens is too large")), {}, "max_tokens is too large"),
        (lambda s: setattr(s, "drop_after", 2), {}, "closed the stream mid-answer"),
        (lambda s: setattr(s, "stall_after", 0), {"timeout_s": 0.5}, "no first token"),
        (lambda s: setattr(s, "stall_after", 2), {"timeout_s": 0.5}, "stalled"),
    ],
    ids=["http-500", "http-400-message", "dropped", "no-first-token", "stalled"],
)
def test_server_failures_fail_the_trial_with_the_reason(openai_server, setup, params, needle):
    session = session_for(openai_server, **params)
    setup(openai_server)
    t0 = time.perf_counter()
    result = run_one(session, max_new_tokens=6)
    assert result.status == "failed"
    assert needle in result.record.error
    assert time.perf_counter() - t0 < 5  # timeouts, not hangs
    openai_server.fail = openai_server.drop_after = openai_server.stall_after = None
    assert run_one(session, max_new_tokens=3).status == "ok"  # the session survives


def test_wrong_model_name_and_unreachable_server_fail_at_load(openai_server):
    from workbench.core.errors import StrategyError

    config = build_config(EndpointStrategy.Config, {"base_url": openai_server.base_url}, where="v")
    with pytest.raises(StrategyError, match="serves fake-model, not 'other'"):
        EndpointStrategy().load(
            Variant(name="v", strategy="endpoint", model="other", config=config), Device("cpu")
        )
    config = build_config(EndpointStrategy.Config, {"base_url": closed_port_url(), "timeout_s": 2}, where="v")
    with pytest.raises(StrategyError, match="cannot connect"):
        EndpointStrategy().load(Variant(name="v", strategy="endpoint", config=config), Device("cpu"))


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('base_url = "ftp://example.org/v1"', "http:// or https://"),
        ('base_url = "http://user:pw@127.0.0.1:8000/v1"', "must not carry credentials"),
        ('api_key_env = "sk-abc123"', "names an environment variable"),
        ('api = "responses"', "must be one of"),
    ],
)
def test_bad_endpoint_parameters_are_spec_errors(extra, needle):
    with pytest.raises(SpecError, match=needle):
        parse_spec(
            f'[[variants]]\nname = "e"\nstrategy = "endpoint"\n{extra}\n[[workloads]]\nname = "code"\n'
        )


def test_concurrency_can_be_swept():
    spec = parse_spec(
        '[[variants]]\nname = "e"\nstrategy = "endpoint"\nsweep = {concurrency = [1, 4]}\n'
        '[[workloads]]\nname = "code"\n'
    )
    assert [(v.name, v.concurrency) for v in spec.variants] == [
        ("e concurrency=1", 1),
        ("e concurrency=4", 4),
    ]


def test_concurrency_is_refused_for_strategies_that_run_one_stream():
    with pytest.raises(SpecError, match="runs one stream at a time"):
        parse_spec(
            '[[variants]]\nname = "f"\nstrategy = "fake"\nconcurrency = 4\n[[workloads]]\nname = "code"\n'
        )
    with pytest.raises(SpecError, match="at least 1"):
        parse_spec(
            '[[variants]]\nname = "e"\nstrategy = "endpoint"\nconcurrency = 0\n[[workloads]]\nname = "code"\n'
        )


# -- score: the server's logprobs of a given token sequence (the quality pass) ----------------------

SCORED = [1, 17, 4242, 99, 31_000, 5, 77, 123, 9, 2024, 640]


def _expected(server, ids, start):
    """The fake's own distribution at each scored position (its known model, as costs are elsewhere)."""
    return [
        (server.distribution(ids[:i])[0], server.logprob_of(ids[:i], ids[i])[0])
        for i in range(start, len(ids))
    ]


def test_a_vllm_server_scores_through_prompt_logprobs_capped_at_its_max_logprobs(openai_server):
    session = session_for(openai_server)  # vLLM: score_top_k = 32 asked, its max_logprobs = 20 given
    scores = session.score(SCORED, 3)
    assert not scores.full
    assert scores.top_ids.shape == scores.top_logprobs.shape == (len(SCORED) - 3, 20)
    assert scores.token_logprobs.shape == (len(SCORED) - 3,)
    for row, (ranked, given) in enumerate(_expected(openai_server, SCORED, 3)):
        assert scores.top_ids[row].tolist() == [t for t, _ in ranked[:20]]
        assert scores.top_logprobs[row].tolist() == pytest.approx([lp for _, lp in ranked[:20]], abs=1e-6)
        assert scores.token_logprobs[row] == pytest.approx(given, abs=1e-6)
    first, second = openai_server.requests[-2:]
    assert first["prompt_logprobs"] == 32 and second["prompt_logprobs"] == 20  # refused, then its limit
    assert second["prompt"] == SCORED and second["max_tokens"] == 1 and second["stream"] is False
    assert "echo" not in second
    openai_server.max_logprobs = 64  # a server started with --max-logprobs 64: k as asked
    assert session.score(SCORED, 1).top_ids.shape == (len(SCORED) - 1, 32)
    assert openai_server.requests[-1]["prompt_logprobs"] == 32


def test_a_perturbed_server_scores_further_from_the_same_one(openai_server):
    import numpy as np

    session = session_for(openai_server, score_top_k=16)
    clean = session.score(SCORED, 1)
    openai_server.logit_noise = 1.0
    noisy = session.score(SCORED, 1)
    assert clean.top_ids.shape == (len(SCORED) - 1, 16)
    assert not np.allclose(clean.top_logprobs, noisy.top_logprobs, atol=1e-3)
    assert (clean.top_ids[:, 0] != noisy.top_ids[:, 0]).any()  # the top token moved somewhere
    openai_server.logit_noise = 0.0
    again = session.score(SCORED, 1)
    assert np.array_equal(again.top_ids, clean.top_ids) and np.array_equal(
        again.top_logprobs, clean.top_logprobs
    )


def test_a_generic_server_scores_through_echo_and_logprobs_named_by_id(openai_server):
    openai_server.vllm = False  # no prompt_logprobs; echo + logprobs, tokens named by text...
    session = session_for(openai_server, score_top_k=8)
    assert session.server_info["server"] == "generic"
    with pytest.raises(NotImplementedError, match=r"not named by id") as info:
        session.score(SCORED, 2)
    assert "\n" not in str(info.value)
    body = openai_server.requests[-1]
    assert body["echo"] is True and body["logprobs"] == 8 and body["return_tokens_as_token_ids"] is True
    openai_server.vllm = True  # ...a vLLM behind server = "generic" names them by id
    config = build_config(
        EndpointStrategy.Config,
        {"base_url": openai_server.base_url, "score_top_k": 8, "server": "generic"},
        where="v",
    )
    session = EndpointStrategy().load(Variant(name="v", strategy="endpoint", config=config), Device("cpu"))
    scores = session.score(SCORED, 2)
    assert scores.top_ids.shape == (len(SCORED) - 2, 8)
    for row, (ranked, given) in enumerate(_expected(openai_server, SCORED, 2)):
        assert scores.top_ids[row].tolist() == [t for t, _ in ranked[:8]]
        assert scores.token_logprobs[row] == pytest.approx(given, abs=1e-6)


@pytest.mark.parametrize(
    ("setup", "error", "needle"),
    [
        # the server does not offer it: NotImplementedError, which the quality pass records "not scored"
        ({"vllm": False, "serve_echo_logprobs": False}, NotImplementedError, "answered without logprobs"),
        ({"serve_prompt_logprobs": False}, NotImplementedError, "has no prompt_logprobs"),
        (
            {"fail": (400, "unknown field")},
            NotImplementedError,
            "refused the scoring request: HTTP 400 .*unknown",
        ),
        # it failed: StrategyError ("failed", with the reason)
        ({"fail": (500, "engine dead")}, StrategyError, "^scoring: HTTP 500 .*engine dead"),
        ({"max_model_len": 8}, StrategyError, r"^the sequence to score \(11 tokens\) leaves no room .*\(8\)"),
    ],
)
def test_a_server_that_gives_no_scores_says_why_in_one_line(openai_server, setup, error, needle):
    for key, value in setup.items():
        setattr(openai_server, key, value)
    session = session_for(openai_server)
    with pytest.raises(error, match=needle) as info:
        session.score(SCORED, 1)
    assert "\n" not in str(info.value)


def test_score_top_k_is_checked():
    with pytest.raises(SpecError, match="score_top_k"):
        parse_spec(
            '[[variants]]\nname = "e"\nstrategy = "endpoint"\nscore_top_k = 0\n[[workloads]]\nname = "code"\n'
        )


# -- whole runs: CLI → worker process → SQLite ------------------------------------------------------


def write_spec(tmp_path, body: str):
    path = tmp_path / "spec.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def keyed_spec(tmp_path, base_url: str, key_env: str):
    """One endpoint variant whose API key comes from ``key_env``, one short code prompt."""
    return write_spec(
        tmp_path,
        f"""
        repetitions = 1
        warmup = 0
        [[variants]]
        name = "keyed"
        strategy = "endpoint"
        base_url = "{base_url}"
        api_key_env = "{key_env}"
        [[workloads]]
        name = "code"
        limit = 1
        max_new_tokens = 3
        """,
    )


def test_a_run_mixes_local_and_endpoint_variants_with_server_figures(openai_server, tmp_path, db_path):
    openai_server.tokens_per_chunk = 3
    spec = write_spec(
        tmp_path,
        f"""
        name = "served"
        repetitions = 2
        warmup = 1

        [[variants]]
        name = "local"
        strategy = "fake"
        prefill_ms = 5
        decode_ms_per_token = 1

        [[variants]]
        name = "served"
        strategy = "endpoint"
        base_url = "{openai_server.base_url}"

        [[variants]]
        name = "served-x4"
        strategy = "endpoint"
        base_url = "{openai_server.base_url}"
        concurrency = 4

        [[workloads]]
        name = "code"
        limit = 4
        max_new_tokens = 7
        """,
    )
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "srv TTFT mean ms" in result.output and "agg tok/s" in result.output
    trials = db_rows(db_path, "select * from trials where warmup = 0 order by id")
    served = [t for t in trials if t["variant"] == "served"]
    assert len(served) == 8 and all(t["status"] == "ok" and t["output_tokens"] == 7 for t in served)
    assert {t["timing_scope"] for t in served} == {"client"}
    assert {t["timing_scope"] for t in trials if t["variant"] == "local"} == {"in-process"}
    parallel = [t for t in trials if t["variant"] == "served-x4"]
    assert {t["concurrency"] for t in parallel} == {4}
    assert all(t["group_offset_ms"] is not None for t in parallel)
    windows = db_rows(db_path, "select * from server_metrics")
    seq = [w for w in windows if w["variant"] == "served"]
    assert len(seq) == 10  # one window per trial, the warm-up of each repetition's fresh worker included
    assert all(w["trials"] == 1 and w["trial_id"] and w["requests"] == 1 for w in seq), [
        (w["trials"], w["trial_id"], w["requests"]) for w in seq
    ]
    par = [w for w in windows if w["variant"] == "served-x4" and not w["warmup"]]
    assert len(par) == 1 and par[0]["trials"] == 8 and par[0]["requests"] == 8 and par[0]["trial_id"] is None
    assert not [w for w in windows if w["variant"] == "local"]
    variants = {v["name"]: v for v in db_rows(db_path, "select * from variants")}
    assert variants["served-x4"]["concurrency"] == 4 and variants["served"]["device"] == "remote"
    assert json.loads(variants["served"]["server"])["served_model"] == "fake-model"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["summary"]
    by_variant = {s["variant"]: s for s in summary}
    server = by_variant["served"]["server"]
    assert 20 <= server["ttft_ms"] <= server["client_ttft_mean_ms"]
    assert server["ttft_gap_ms"] >= 0 and server["requests"] == 8 and server["other_requests"] == 0
    assert server["acceptance_rate"] == pytest.approx(1.0)
    assert server["mean_accepted_length"] == pytest.approx(3.0)
    assert by_variant["local"]["server"] is None
    # four parallel streams against a server that batches ideally: about 4x the tokens per second
    ratio = (
        by_variant["served-x4"]["throughput_tokens_per_s"] / by_variant["served"]["throughput_tokens_per_s"]
    )
    # the group's stream starts and durations say where a slow group lost its time (one seen at 1.86)
    assert 2.0 < ratio < 5.0, [(round(t["group_offset_ms"]), round(t["e2e_ms"])) for t in parallel]
    assert (tmp_path / "out" / "server_metrics.csv").exists()
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "srv TTFT mean ms" in report and "agg tok/s" in report and " srv" in report


def test_an_unreachable_server_fails_its_trials_and_the_run_goes_on(tmp_path, db_path):
    spec = write_spec(
        tmp_path,
        f"""
        repetitions = 1
        warmup = 0

        [[variants]]
        name = "gone"
        strategy = "endpoint"
        base_url = "{closed_port_url()}"
        timeout_s = 2

        [[variants]]
        name = "local"
        strategy = "fake"
        prefill_ms = 1
        decode_ms_per_token = 0.1

        [[workloads]]
        name = "code"
        limit = 2
        max_new_tokens = 3
        """,
    )
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db_path)])
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    trials = db_rows(db_path, "select variant, status, error from trials")
    gone = [t for t in trials if t["variant"] == "gone"]
    assert len(gone) == 2 and all(t["status"] == "failed" and "cannot connect" in t["error"] for t in gone)
    assert all(t["status"] == "ok" for t in trials if t["variant"] == "local")


def test_the_api_key_is_sent_but_never_stored(openai_server, tmp_path, db_path, monkeypatch):
    secret = "sk-test-5f3c9a0b7d1e"
    openai_server.require_key = secret
    monkeypatch.setenv("WB_TEST_KEY", secret)
    spec = keyed_spec(tmp_path, openai_server.base_url, "WB_TEST_KEY")
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    files = [db_path, *db_path.parent.glob("results.db-*"), *(tmp_path / "out").iterdir()]
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    monkeypatch.delenv("WB_TEST_KEY")
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db_path)])
    assert result.exit_code == 2
    assert "WB_TEST_KEY" in result.output and "Traceback" not in result.output


def test_a_wrong_api_key_fails_the_variant_with_the_servers_message(
    openai_server, tmp_path, db_path, monkeypatch
):
    openai_server.require_key = "right"
    monkeypatch.setenv("WB_WRONG_KEY", "wrong")
    spec = keyed_spec(tmp_path, openai_server.base_url, "WB_WRONG_KEY")
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db_path)])
    assert result.exit_code == 3, result.output
    (trial,) = db_rows(db_path, "select status, error from trials")
    assert (
        trial["status"] == "failed" and "HTTP 401" in trial["error"] and "Invalid API key" in trial["error"]
    )


# -- pieces: the metrics parser, the token split, the plan ----------------------------------------

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="smollm2"} 1.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="smollm2"} %(stop)s
vllm:request_success_total{engine="0",finished_reason="length",model_name="smollm2"} %(length)s
vllm:request_success_created{engine="0",finished_reason="stop",model_name="smollm2"} 1.79e+09
vllm:request_success_total{engine="0",finished_reason="length",model_name="other"} %(other)s
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="smollm2"} 0.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="smollm2"} %(count)s
vllm:time_to_first_token_seconds_sum{engine="0",model_name="smollm2"} %(ttft_sum)s
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="smollm2"} %(drafts)s
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="smollm2"} %(draft_tokens)s
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="smollm2"} %(accepted)s
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="0"} %(pos0)s
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smollm2",position="1"} %(pos1)s
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="smollm2"} %(hits)s
"""


def _page(**values):
    base = dict(stop=0, length=0, other=0, count=0, ttft_sum=0, drafts=0, draft_tokens=0, accepted=0)
    return VLLM_METRICS % {**base, "pos0": 0, "pos1": 0, "hits": 0, **values}


def test_vllm_metrics_page_deltas():
    from workbench_strategies.endpoint.prometheus import parse_prometheus, window_figures

    before = parse_prometheus(_page(stop=2, count=2, ttft_sum=0.2, drafts=5, draft_tokens=20, accepted=9))
    after = parse_prometheus(
        _page(stop=3, length=2, other=7, count=5, ttft_sum=0.5, drafts=15, draft_tokens=60, accepted=33)
        .replace('position="0"} 0', 'position="0"} 9')
        .replace('position="1"} 0', 'position="1"} 4')
        .replace(
            'prefix_cache_hits_total{engine="0",model_name="smollm2"} 0',
            'prefix_cache_hits_total{engine="0",model_name="smollm2"} 6',
        )
    )
    figures = window_figures(before, after, "smollm2")
    assert figures["requests"] == 3  # stop + length for this model; the other model's 7 are not ours
    assert figures["ttft_ms"] == pytest.approx(100.0)  # (0.5 - 0.2) s over 3 requests
    assert figures["ttft_count"] == 3
    assert (figures["spec_drafts"], figures["spec_draft_tokens"], figures["spec_accepted_tokens"]) == (
        10,
        40,
        24,
    )
    assert json.loads(figures["spec_accepted_per_pos"]) == [9, 4]
    assert figures["extra"] == {"vllm:prefix_cache_hits_total": 6.0}  # counters that moved; no gauges


@pytest.mark.parametrize(
    ("chars", "total", "ends", "expected"),
    [
        ([3, 3, 3], 3, None, [1, 1, 1]),
        ([3, 6, 3], 7, None, [2, 3, 2]),  # at least one per chunk with text, the rest by characters
        ([3, 3, 0], 4, None, [2, 2, 0]),  # the finishing chunk gets the rest only in _recount (EOS)
        ([4, 4], 3, [2, 4, 8], [2, 1]),  # a token belongs to the chunk that brought its last character
        ([4, 4], 4, [2, 4, 8], [2, 2]),  # a token beyond the text (EOS) goes to the last chunk
        ([2, 2, 2], 2, [3, 6], [0, 1, 1]),  # a chunk that completed no token holds none
    ],
)
def test_split_counts(chars, total, ends, expected):
    from workbench_strategies.endpoint.session import split_counts

    counts = split_counts(chars, total, ends)
    assert counts == expected and sum(counts) == total


def test_concurrent_variants_run_each_workload_as_one_group():
    from workbench.run.plan import plan_run, trial_groups

    spec = parse_spec(
        """
        repetitions = 2
        warmup = 1
        [[variants]]
        name = "seq"
        strategy = "endpoint"
        [[variants]]
        name = "par"
        strategy = "endpoint"
        concurrency = 4
        [[workloads]]
        name = "code"
        limit = 3
        [[workloads]]
        name = "chat"
        limit = 2
        """
    )
    seq, par = plan_run(spec)
    assert sorted(map(repr, seq.trials)) == sorted(map(repr, par.trials))  # the same trials
    # chat's two turns fall in two prompt-length buckets: a warm-up each
    assert [(t.workload, t.warmup) for t in par.trials] == [("code", True)] + [("code", False)] * 6 + [
        ("chat", True)
    ] * 2 + [("chat", False)] * 4
    assert [len(g) for g in trial_groups(par.trials, 4)] == [1, 6, 2, 4]
    assert trial_groups(seq.trials, 1) == [[i] for i in range(len(seq.trials))]


def test_outputs_without_token_ids_are_compared_with_the_baseline_as_text(db_path):
    from workbench.analysis.fidelity import baseline_comparisons
    from workbench.store import Store, TrialRecord

    store = Store(db_path)
    run_id = store.create_run(name="r", spec_text="", baseline="local", version="0")
    common = {
        "workload": "w",
        "prompt_id": "p",
        "repetition": 0,
        "warmup": 0,
        "status": "ok",
        "temperature": 0.0,
    }
    store.add_trial(
        run_id,
        TrialRecord.from_row(
            {**common, "variant": "local", "output_text": "Hello there", "output_token_ids": "[5, 6]"}
        ),
    )
    same = store.add_trial(
        run_id, TrialRecord.from_row({**common, "variant": "served", "output_text": "Hello there"})
    )
    other = store.add_trial(
        run_id, TrialRecord.from_row({**common, "variant": "served2", "output_text": "Hello world"})
    )
    store.set_baseline_comparison(baseline_comparisons(store.trials(run_id), "local"))
    by_id = {t.id: t for t in store.trials(run_id)}
    assert by_id[same].matches_baseline == 1
    assert by_id[other].matches_baseline == 0 and by_id[other].first_divergence == 6
