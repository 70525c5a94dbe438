"""The GPU check's figures (scripts/gpu_figures.py), on a recorded run of the fake strategy whose
environment and figures are set to those of a GPU: a wrong figure fails the check."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke, write

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_figures.py"
spec = importlib.util.spec_from_file_location("gpu_figures", SCRIPT)
assert spec is not None and spec.loader is not None
gpu_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_figures)

SPEC = """
name = "figures"
repetitions = 1
warmup = 0

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 2
decode_ms_per_token = 1

[[workloads]]
name = "code"
limit = 1
max_new_tokens = 4
"""


@pytest.fixture
def gpu_run(tmp_path):
    """A recorded run made to look like one on an H200: weights 2 GB, 4 TB/s measured."""
    db = tmp_path / "gpu.db"
    assert invoke("run", write(tmp_path / "s.toml", SPEC), "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("select environment from runs").fetchone()
        environment = json.loads(text)
        environment["host"]["gpu"] = "NVIDIA H200"
        conn.execute("update runs set environment = ?", [json.dumps(environment)])
        conn.execute(
            "update variants set weights_mb = 2048, memory_bandwidth_gbs = 4000, strategy = 'baseline', "
            "device = 'cuda:0', dtype = 'bfloat16'"
        )
        conn.execute("update trials set peak_memory_mb = 2300, ttft_ms = 40, tpot_ms = 8")
    return db


def figures(db, *args: str) -> int:
    return gpu_figures.main([str(db), "--expect", "baseline", *args])


def test_plausible_figures_pass(gpu_run, capsys):
    assert figures(gpu_run, "--not-covered", "llama-cpp on CUDA: not in the bundle") == 0
    said = capsys.readouterr().out
    assert "bandwidth 4000 GB/s = 83% of the NVIDIA H200 datasheet 4800 GB/s" in said
    assert "not covered: llama-cpp on CUDA: not in the bundle" in said and "Figures: all ok" in said


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("update variants set memory_bandwidth_gbs = 900", "bandwidth 900 GB/s = 19%"),
        ("update trials set tpot_ms = 0.2", "TPOT median 0.20 ms in [0.40 (roofline), 250]"),
        ("update trials set ttft_ms = 9000", "TTFT median 9000.0 ms"),
        ("update trials set peak_memory_mb = 10", "peak 10 MB (process_rss_peak) >= weights 2048 MB"),
        ("update trials set status = 'failed'", "baseline: 1 measured trials, status failed"),
    ],
)
def test_an_implausible_figure_fails(gpu_run, capsys, change, why):
    with sqlite3.connect(gpu_run) as conn:
        conn.execute(change)
    assert figures(gpu_run) == 1
    said = capsys.readouterr().out
    assert f"FAIL {why}" in said or ("FAIL" in said and why in said), said


def test_a_missing_variant_a_failed_export_and_bad_show_json_fail(gpu_run, tmp_path, capsys):
    bad = tmp_path / "show.json"
    bad.write_text("not json")
    assert (
        figures(
            gpu_run, "--expect", "quantized int4-weight-only", "--export-ok", "0", "--show-json", str(bad)
        )
        == 1
    )
    said = capsys.readouterr().out
    assert "FAIL quantized int4-weight-only: 0 measured trials" in said
    assert "FAIL export" in said and "FAIL show --json" in said


def test_the_datasheet_table_matches_the_specific_part_first():
    assert gpu_figures.datasheet_gbs("NVIDIA GH200 480GB") == 4000
    assert gpu_figures.datasheet_gbs("NVIDIA H100 PCIe") == 2000
    assert gpu_figures.datasheet_gbs("NVIDIA H100 80GB HBM3") == 3350
    assert gpu_figures.datasheet_gbs("NVIDIA A100-SXM4-40GB") == 1555
    assert gpu_figures.datasheet_gbs("NVIDIA L40S") == 864
    assert gpu_figures.datasheet_gbs("Some Future GPU") is None
