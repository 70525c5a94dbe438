"""The environment record (what a run's numbers were measured on): the CPU's instruction set, the
runtime libraries' versions, matmul precision; ``show`` names the instruction set and ``compare A B``
names a difference that can explain a changed verdict; warm-ups cover every prompt-length bucket."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_helpers import invoke, write

from workbench.formatting import environment_lines, instruction_set, machine_line
from workbench.run.environment import cpu_flags, package_versions, snapshot

EPYC_AVX512 = "processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 sha_ni\n"
EPYC_AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx2 fma sha_ni\n"


def test_cpu_flags_keep_the_instruction_sets_that_change_kernels():
    assert cpu_flags(EPYC_AVX512) == ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"]
    assert cpu_flags(EPYC_AVX2) == ["avx2", "fma"]
    assert cpu_flags("processor : 0\n") is None  # not readable: unknown, not "none"
    assert instruction_set(cpu_flags(EPYC_AVX512)) == "AVX-512 VNNI/BF16"
    assert instruction_set(["avx2", "fma"]) == "AVX2 only"
    assert instruction_set(["avx2", "avx_vnni", "amx_tile", "amx_int8"]) == "AVX2 + AVX-VNNI + AMX"
    assert instruction_set(None) == ""


def test_the_snapshot_records_flags_runtime_versions_and_matmul_precision():
    env = snapshot()
    assert "cpu_flags" in env
    if __import__("sys").platform.startswith("linux"):
        assert isinstance(env["cpu_flags"], list)
    versions = package_versions()
    for name in ("torchao", "bitsandbytes", "onnxruntime-genai"):  # installed in the test environment
        pytest.importorskip(name.replace("-", "_"))
        assert name in versions, name


def test_the_machine_line_and_the_environment_section_name_the_instruction_set():
    host = {"cpu": "AMD EPYC 9B14", "cpu_count": 2, "memory_gb": 8.0, "cpu_flags": cpu_flags(EPYC_AVX512),
            "packages": {"torch": "2.13"}, "matmul_precision": "high", "tf32_matmul": True}  # fmt: skip
    assert "AMD EPYC 9B14 ×2 (AVX-512 VNNI/BF16)" in machine_line(host)
    lines = environment_lines(host)
    assert any(line.startswith("CPU instruction set: AVX-512 VNNI/BF16 (flags: avx2, fma") for line in lines)
    assert "float32 matmul precision: high, TF32 matmuls on" in lines


SPEC = """
name = "{name}"
repetitions = 2
warmup = 0

[[variants]]
name = "base"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.2

[[variants]]
name = "int8"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.1

[[workloads]]
name = "code"
limit = 1
max_new_tokens = 4
"""


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    """Two runs of one spec, their recorded environments those of two hosts of the same label: one
    with AVX-512 VNNI, one with AVX2 only."""
    root = tmp_path_factory.mktemp("two-hosts")
    db = root / "results.db"
    for name in ("host-a", "host-b"):
        result = invoke("run", write(root / f"{name}.toml", SPEC.format(name=name)), "--db", db)
        assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        for run_id, cpuinfo in ((1, EPYC_AVX512), (2, EPYC_AVX2)):
            (text,) = conn.execute("select environment from runs where id = ?", [run_id]).fetchone()
            environment = json.loads(text)
            environment["host"].update(cpu="AMD EPYC", cpu_count=2, cpu_flags=cpu_flags(cpuinfo))
            conn.execute("update runs set environment = ? where id = ?", [json.dumps(environment), run_id])
    return db


def test_compare_names_the_instruction_set_difference(two_hosts):
    said = " ".join(invoke("compare", "1", "2", "--db", two_hosts).stdout.split())  # unwrapped
    assert "What can explain a changed verdict" in said
    assert "instruction set: run 1: AVX-512 VNNI/BF16; run 2: AVX2 only — int8 kernels differ" in said
    assert "bf16 kernels differ" in said and "vector width 512 vs 256 bits" in said
    assert said.count("instruction set: run 1") == 1  # not repeated among the other differences


def test_show_names_the_instruction_set(two_hosts):
    assert "AMD EPYC ×2 (AVX2 only)" in invoke("show", "2", "--db", two_hosts).stdout


# --- warm-up per prompt-length bucket ----------------------------------------------------------------


def test_every_prompt_length_bucket_is_warmed_before_it_is_measured(tmp_path):
    from workbench.run.plan import length_bucket, plan_run
    from workbench.spec.parse import parse_spec

    lines = [{"id": f"p{n}", "prompt": "word " * n} for n in (30, 34, 300, 2400, 2600)]
    (tmp_path / "mixed.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    spec = parse_spec(
        'name = "b"\nrepetitions = 2\nwarmup = 1\n[[variants]]\nname = "a"\nstrategy = "fake"\n'
        '[[workloads]]\nname = "mixed"\nfile = "mixed.jsonl"\nmax_new_tokens = 16\n',
        base_dir=tmp_path,
    )
    (plan,) = plan_run(spec)
    warmed = [t for t in plan.trials if t.warmup]
    measured = [t for t in plan.trials if not t.warmup]
    buckets = {length_bucket(t.prompt) for t in warmed}
    assert {length_bucket(t.prompt) for t in measured} <= buckets
    assert [t.prompt.id for t in warmed] == ["p30", "p300", "p2400"]  # the first of each bucket
    assert [t.max_new_tokens for t in warmed] == [16, 4, 4]  # the extra ones: the prefill's shape
    # all warm-ups come before the first measured trial
    assert max(i for i, t in enumerate(plan.trials) if t.warmup) < min(
        i for i, t in enumerate(plan.trials) if not t.warmup
    )
