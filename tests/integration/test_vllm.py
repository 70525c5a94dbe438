"""A real vLLM server on the CPU, measured beside a local variant.

Two vLLM servers (plain, and with n-gram speculative decoding) serve the demo model on 127.0.0.1
from the separate venv that ``scripts/vllm_venv.sh`` builds; one spec runs the local baseline, both
endpoints, and the plain one with two parallel streams; the test checks the database, the
comparison table and the export. The servers are stopped by their process ids, also when the test
fails. Run with ``pytest tests/integration --vllm`` (CI does, see docs/ci.md); the spec is tiny
because the CI machine has two shared cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from workbench.cli import cli
from workbench.testing.helpers import db_rows

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

VENV = Path(os.environ.get("WORKBENCH_VLLM_VENV", Path.home() / ".cache" / "workbench-ci" / "vllm-venv"))
STARTUP_TIMEOUT_S = float(os.environ.get("WORKBENCH_VLLM_STARTUP_S", "1200"))
SERVED = "smollm2"
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'

# Prompts that invite copying from the context, so that n-gram drafts get accepted.
PROMPTS = [
    {
        "id": "copy-list",
        "prompt": "Copy the list exactly.\nList: red apple, green pear, yellow banana, red apple, green pear, "
        "yellow banana.\nCopy: red apple, green pear,",
    },
    {
        "id": "copy-code",
        "prompt": "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return a + b\n\n\ndef add(a, b):\n",
    },
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """One ``vllm serve`` process group, started in its own session and stopped by its pid."""

    def __init__(self, model_dir: Path, workdir: Path, name: str, *extra: str) -> None:
        self.port = _free_port()
        self.log_path = workdir / f"{name}.log"
        env = {
            **os.environ,
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "2",  # GiB of KV cache: plenty for a few short prompts
            "VLLM_CACHE_ROOT": str(workdir / f"{name}-cache"),
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
        }
        command = [
            str(VENV / "bin" / "vllm"),
            "serve",
            str(model_dir),
            "--served-model-name",
            SERVED,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",  # as the local baseline, so that greedy outputs can match
            "--max-model-len",
            "1024",
            "--enforce-eager",  # no graph capture: starts in about 40 s on an idle machine
            *extra,
        ]
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vLLM exited with {self.proc.returncode} while starting:\n{self.tail()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(2)
        pytest.fail(f"vLLM did not answer /health within {STARTUP_TIMEOUT_S:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the server's process group (the API server and its engine core), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            except ProcessLookupError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):  # children of a server that died
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    if not (VENV / "bin" / "vllm").exists():
        pytest.fail(f"no vLLM venv at {VENV}: run `bash scripts/vllm_venv.sh` first (docs/ci.md)")
    from workbench.sources import ensure_demo_model

    model_dir = ensure_demo_model("smollm2-135m")  # the demo model as a Hugging Face folder
    workdir = tmp_path_factory.mktemp("vllm")
    started: list[VLLMServer] = []
    try:
        # Both start at once: on two cores that is still faster than one after the other.
        started.append(VLLMServer(model_dir, workdir, "plain"))
        started.append(VLLMServer(model_dir, workdir, "ngram", "--speculative-config", NGRAM))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for server in started:
            server.wait_ready(deadline)
        yield {"plain": started[0], "ngram": started[1], "model_dir": model_dir}
    finally:
        for server in started:
            server.stop()


def test_a_spec_mixing_a_local_variant_and_vllm_endpoints(servers, tmp_path):
    prompts = tmp_path / "copy.jsonl"
    prompts.write_text("\n".join(json.dumps(p) for p in PROMPTS) + "\n", encoding="utf-8")
    spec = tmp_path / "served.toml"
    spec.write_text(
        textwrap.dedent(
            f"""
            name = "local vs vLLM"
            repetitions = 2
            warmup = 1
            baseline = "local"

            [[variants]]
            name = "local"
            model = "demo:smollm2-135m"
            strategy = "baseline"
            dtype = "float32"
            device = "cpu"

            [[variants]]
            name = "vllm"
            strategy = "endpoint"
            base_url = "{servers["plain"].base_url}"
            model = "{SERVED}"
            timeout_s = 300

            [[variants]]
            name = "vllm-ngram"
            strategy = "endpoint"
            base_url = "{servers["ngram"].base_url}"
            model = "{SERVED}"
            timeout_s = 300

            [[variants]]
            name = "vllm-x2"
            strategy = "endpoint"
            base_url = "{servers["plain"].base_url}"
            model = "{SERVED}"
            timeout_s = 300
            concurrency = 2

            [[workloads]]
            name = "copy"
            file = "copy.jsonl"
            max_new_tokens = 16
            ignore_eos = true
            """
        ),
        encoding="utf-8",
    )
    db = tmp_path / "results.db"
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db), "--out", str(out)])
    print(result.output)  # the comparison table, in the CI log
    assert result.exit_code == 0, result.output
    assert "srv TTFT mean ms" in result.output and "agg tok/s" in result.output

    trials = db_rows(db, "select * from trials where warmup = 0")
    assert len(trials) == 4 * 2 * 2
    assert all(t["status"] == "ok" and t["output_tokens"] == 16 for t in trials)
    served = [t for t in trials if t["variant"] != "local"]
    assert {t["timing_scope"] for t in served} == {"client"}
    assert {t["token_count_source"] for t in served} == {"server-token-ids"}
    assert all(
        t["input_tokens"]
        == next(
            b["input_tokens"] for b in trials if b["variant"] == "local" and b["prompt_id"] == t["prompt_id"]
        )
        for t in served
    ), "vLLM and the local tokenizer should see the same prompt tokens"
    # greedy, float32 on both sides: vLLM's tokens are compared with the local baseline's
    assert all(t["matches_baseline"] is not None for t in served)
    assert sum(t["match_fraction"] for t in served) / len(served) > 0.5
    assert {t["concurrency"] for t in trials if t["variant"] == "vllm-x2"} == {2}

    windows = db_rows(db, "select * from server_metrics where warmup = 0")
    plain = [w for w in windows if w["variant"] == "vllm"]
    assert len(plain) == 4 and all(w["trials"] == 1 and w["requests"] == 1 and w["trial_id"] for w in plain)
    for w in plain:  # the server's TTFT is inside the client's: the gap is HTTP, network, queueing
        (trial,) = [t for t in trials if t["id"] == w["trial_id"]]
        assert 0 < w["ttft_ms"] <= trial["ttft_ms"]
        assert not w["spec_draft_tokens"]
    ngram = [w for w in windows if w["variant"] == "vllm-ngram"]
    assert len(ngram) == 4 and sum(w["spec_draft_tokens"] or 0 for w in ngram) > 0
    assert sum(w["spec_accepted_tokens"] or 0 for w in ngram) > 0  # the prompts are made to be copied
    (parallel,) = [w for w in windows if w["variant"] == "vllm-x2"]
    assert parallel["trials"] == 4 and parallel["requests"] >= 4

    summary = {s["variant"]: s for s in json.loads((out / "summary.json").read_text())["summary"]}
    assert summary["local"]["server"] is None and summary["local"]["timing_scope"] == "in-process"
    assert summary["vllm"]["server"]["ttft_ms"] > 0
    assert summary["vllm-ngram"]["server"]["acceptance_rate"] > 0
    assert summary["vllm-ngram"]["server"]["mean_accepted_length"] > 1
    assert summary["vllm-x2"]["throughput_tokens_per_s"] > 0
    assert (out / "server_metrics.csv").exists()
    assert "srv TTFT mean ms" in (out / "summary.md").read_text()
