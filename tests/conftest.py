"""Fixtures and pytest options. The helpers tests import live in :mod:`workbench.testing.helpers`."""

from __future__ import annotations

import os

import pytest

# Never let a test write into the user's real results database or model cache by accident.
os.environ.pop("WORKBENCH_DB", None)
# A known memory bandwidth for runs made by tests (roofline figures with known answers; no 0.2 s
# measurement per worker, nothing written to the user's cache). tests/test_roofline.py measures.
os.environ["WORKBENCH_BANDWIDTH_GBS"] = "20"
# Qt tests run headless (CI has no display); a developer can override it to watch a real window.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from workbench.testing.helpers import build_tiny_model, load_session


def pytest_addoption(parser):
    parser.addoption(
        "--vllm",
        action="store_true",
        help="run the tests that start a real vLLM server (venv from scripts/vllm_venv.sh; see docs/ci.md)",
    )
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/ from the current output (tests/test_golden.py) instead of comparing",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--vllm"):
        return
    skip = pytest.mark.skip(reason="starts a real vLLM server: run with --vllm (see docs/ci.md)")
    for item in items:
        if "vllm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "results.db"


@pytest.fixture
def gui_settings(tmp_path, monkeypatch):
    """The desktop app's settings file, one per test (so no test reads another's geometry or
    columns). The GUI test modules use it with ``pytestmark = pytest.mark.usefixtures("gui_settings")``."""
    path = tmp_path / "gui.ini"
    monkeypatch.setenv("WORKBENCH_GUI_SETTINGS", str(path))
    return path


@pytest.fixture(scope="module")
def one_thread():
    """The tiny models are latency-bound: on a busy machine extra intra-op threads only spin (a
    prefill of 55 tokens measured 3 ms on 1 thread vs 260 ms on 2 contended ones). Use it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def float32_mb(tiny_model_dir):
    """The tiny model's float32 weight footprint, as the baseline reports it."""
    session = load_session(tiny_model_dir, "baseline")
    mb = session.weights_mb
    session.close()
    return mb


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    pytest.importorskip("torch")
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_model_dir_64(tmp_path_factory):
    """The tiny llama with heads of 16 (hidden size 64): ONNX Runtime's attention refuses smaller."""
    pytest.importorskip("torch")
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama-64"), hidden_size=64)


#: A run with known costs: a baseline, a "quantized-like" variant (faster decode, slower prefill) and a
#: "speculative-like" one (3 tokens per step), on prompts of different lengths and both sweeps. Costs
#: are large enough (ms) to stay distinguishable on a loaded CI machine: the fake keeps an absolute
#: schedule, so a late prefill shortens the decode that follows, but totals and slopes hold.
FAKE_LEVERS_SPEC = """
name = "fake levers"
repetitions = 2
warmup = 1

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 1
prefill_ms_per_token = 0.2
decode_ms_per_token = 1.0
weights_mb = 5

[[variants]]
name = "int8"
strategy = "fake"
prefill_ms = 1
prefill_ms_per_token = 0.3
decode_ms_per_token = 0.6
weights_mb = 2.5

[[variants]]
name = "spec"
strategy = "fake"
prefill_ms = 1.5
prefill_ms_per_token = 0.2
decode_ms_per_token = 0.5
tokens_per_step = 3
weights_mb = 6

[[workloads]]
name = "rag"
limit = 2
max_new_tokens = 4

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 32

[[workloads]]
name = "sweep-input"
limit = 3
max_new_tokens = 8

[[workloads]]
name = "sweep-output"
limit = 3
"""


@pytest.fixture(scope="session")
def fake_run_db(tmp_path_factory):
    """A real results DB holding one finished run of FAKE_LEVERS_SPEC (run id 1)."""
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    path = tmp_path_factory.mktemp("fake-run") / "results.db"
    with Store(path) as store:
        result = RunExecutor(parse_spec(FAKE_LEVERS_SPEC), store).run()
    assert result.status == "ok", result.errors
    return path


@pytest.fixture
def openai_server():
    """A real local OpenAI-compatible streaming server (stdlib, in a thread) with known costs."""
    from workbench.testing.fake_server import FakeOpenAIServer

    with FakeOpenAIServer(prefill_ms=20, decode_ms_per_token=4) as server:
        yield server
