"""The local runtimes beside transformers (``llama-cpp``, ``onnxruntime-genai``) when their package is
missing: listed as unavailable with what to install, and a spec naming one exits 2 with one line
before anything is recorded. Runs without either package (each is hidden here)."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from workbench.cli import cli
from workbench.core import registry

CASES = [
    ("llama-cpp", "llama_cpp", "pip install 'llm-workbench[llama-cpp]'"),
    ("onnxruntime-genai", "onnxruntime_genai", "pip install 'llm-workbench[engine,ort-genai]'"),
]


@pytest.mark.parametrize(("strategy", "module", "install"), CASES)
def test_without_the_package_a_spec_naming_it_exits_2_with_one_line(
    strategy, module, install, monkeypatch, tmp_path
):
    monkeypatch.setitem(sys.modules, module, None)  # importlib.util.find_spec() -> None: not installed
    reason = registry.get(strategy)().available()
    assert reason is not None and install in reason
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'[[variants]]\nname = "rt"\nstrategy = "{strategy}"\nmodel = "demo:smollm2-135m"\n'
        '[[workloads]]\nname = "code"\n'
    )
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert f"strategy '{strategy}' is not available here" in lines[0] and install in lines[0]
    assert not db.exists()  # refused before anything was recorded


@pytest.mark.slow
@pytest.mark.demo
def test_a_run_with_both_runtimes_beside_the_baseline_fills_the_database(tmp_path):
    """The issue's "done when": baseline, llama-cpp (the demo GGUF as shipped and re-quantized) and
    onnxruntime-genai int4 in one `workbench run`, compared like any other variants."""
    for module in ("llama_cpp", "onnxruntime_genai", "onnx_ir", "torch"):
        pytest.importorskip(module)
    from workbench.testing.helpers import db_rows

    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
name = "runtimes"
repetitions = 1
warmup = 0
[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
dtype = "float32"
[[variants]]
name = "q4_1"
model = "demo:smollm2-135m"
strategy = "llama-cpp"
n_ctx = 1024
[[variants]]
name = "q8_0"
model = "demo:smollm2-135m"
strategy = "llama-cpp"
gguf_type = "Q8_0"
n_ctx = 1024
[[variants]]
name = "ort-int4"
model = "demo:smollm2-135m"
strategy = "onnxruntime-genai"
[[workloads]]
name = "code"
limit = 1
max_new_tokens = 8
ignore_eos = true
"""
    )
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    variants = {r["name"]: r for r in db_rows(db, "SELECT * FROM variants")}
    assert variants["q4_1"]["dtype"] == "Q4_1" and variants["q8_0"]["dtype"] == "Q8_0"
    assert variants["ort-int4"]["dtype"] == "int4"
    for name in ("q4_1", "q8_0", "ort-int4"):
        assert 0 < variants[name]["weights_mb"] < variants["baseline"]["weights_mb"] / 3
        assert variants[name]["kv_bytes_per_token"] > 0 and variants[name]["context_length"] > 0
    trials = db_rows(db, "SELECT * FROM trials WHERE NOT warmup")
    assert {t["variant"] for t in trials} == set(variants) and all(t["status"] == "ok" for t in trials)
    for t in trials:
        assert t["output_tokens"] == 8 and t["ttft_ms"] > 0 and t["tpot_ms"] > 0
        if t["variant"] != "baseline":
            assert t["matches_baseline"] in (0, 1) and 0 <= t["match_fraction"] <= 1
    steps = db_rows(db, "SELECT n_tokens FROM steps")
    assert steps and all(s["n_tokens"] == 1 for s in steps)
