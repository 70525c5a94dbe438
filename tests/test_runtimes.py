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
