"""What a first run on a GPU would still get wrong, each exercised on a CPU machine through
**stand-ins** for what only a GPU has (a fake ``llama_cpp`` module, monkeypatched ``torch.cuda`` calls,
a meta-device generator, a recorded run dressed as a GPU's). What the stand-ins cannot prove is asserted
on a GPU by ``scripts/gpu_check.sh`` (docs/ci.md "The GPU check")."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.core.device import Device

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- device = "cpu" never touches the CUDA driver -----------------------------------------------------


def test_resolving_cpu_never_asks_for_cuda_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench.core.device import resolve_device

    def driver(*args, **kwargs):  # stand-in: on a GPU box this starts the CUDA driver
        raise AssertionError("torch.cuda was asked for a cpu variant")

    monkeypatch.setattr(torch.cuda, "is_available", driver)
    monkeypatch.setattr(torch.cuda, "device_count", driver)
    assert resolve_device("cpu") == Device("cpu")


def _cpu_job():
    from workbench.run.plan import plan_run
    from workbench.spec.parse import parse_spec

    spec = parse_spec(
        'name = "w"\nrepetitions = 1\nwarmup = 0\n[[variants]]\nname = "a"\nstrategy = "fake"\n'
        'device = "cpu"\n[[workloads]]\nname = "code"\nlimit = 1\nmax_new_tokens = 2\n'
    )
    (plan,) = plan_run(spec)
    return {"variant": plan.variant.to_dict(), "trials": [t.to_dict() for t in plan.trials]}


def test_a_cpu_worker_hides_the_gpus_before_any_runtime_loads_standin(monkeypatch):
    from workbench.run import worker

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    job = _cpu_job()
    worker.hide_gpus_from(job)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    job["variant"]["device"] = "cuda:0"
    worker.hide_gpus_from(job)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


# --- llama.cpp on CUDA: placement, flash attention, the backend ---------------------------------------


class _Llama:
    def __init__(self, model_path: str, n_gpu_layers: int = 0, main_gpu: int = 0, op_offload=None) -> None:
        pass


def fake_llama_cpp(system_info: bytes = b"CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : AVX2 = 1 |"):
    """A stand-in GPU build of ``llama_cpp``: its system info names the ggml backends it registered."""
    return SimpleNamespace(
        __version__="0.3.36-standin",
        llama_supports_gpu_offload=lambda: True,
        llama_print_system_info=lambda: system_info,
        LLAMA_SPLIT_MODE_NONE=0,
        Llama=_Llama,
    )


def test_llama_cpp_cuda_with_no_layers_offloaded_is_refused_standin():
    from workbench_strategies.llama_cpp import gpu_placement

    from workbench.strategy import StrategyError

    with pytest.raises(StrategyError) as caught:
        gpu_placement(fake_llama_cpp(), Device("cuda", 0), 0)
    assert "\n" not in str(caught.value) and "n_gpu_layers = 0" in str(caught.value)


def test_llama_cpp_records_the_layers_actually_offloaded_and_labels_a_partial_offload_standin():
    from workbench_strategies.llama_cpp import offload_backend

    # llama.cpp's own log line wins; without it, the layers follow from n_gpu_layers and the model
    full = offload_backend(0, requested=-1, model_layers=16, logged=(17, 17))
    assert full == "llama.cpp CUDA offload on cuda:0 (17/17 layers)"
    partial = offload_backend(0, requested=6, model_layers=16, logged=None)
    assert partial == "llama.cpp CUDA offload on cuda:0 (6/17 layers: partial, the rest on the CPU)"
    assert "partial" in offload_backend(1, requested=-1, model_layers=16, logged=(12, 17))


def test_llama_cpp_log_line_gives_the_offloaded_layers_standin():
    from workbench_strategies.llama_cpp import parse_offload

    assert parse_offload("load_tensors: offloaded 17/17 layers to GPU\n") == (17, 17)
    assert parse_offload("llama_model_load: vocab only") is None


def test_llama_cpp_flash_attention_is_on_by_default_on_cuda_standin():
    from workbench_strategies.llama_cpp import LlamaCppConfig, gpu_placement

    config = LlamaCppConfig()
    cuda = gpu_placement(fake_llama_cpp(), Device("cuda", 0), -1, flash_attn=config.flash_attn)
    assert cuda.kwargs["flash_attn"] is True  # as torch's SDPA flash attention on the same GPU
    cpu = gpu_placement(fake_llama_cpp(), Device("cpu"), -1, flash_attn=config.flash_attn)
    assert cpu.kwargs["flash_attn"] is False
    forced = gpu_placement(fake_llama_cpp(), Device("cuda", 0), -1, flash_attn=False)
    assert forced.kwargs["flash_attn"] is False


@pytest.mark.parametrize(
    "info", [b"Vulkan : warp size = 32 | CPU : AVX2 = 1 |", b"SYCL : | CPU : AVX2 = 1 |"]
)
def test_llama_cpp_gpu_build_that_is_not_cuda_is_refused_for_cuda_standin(info):
    from workbench_strategies.llama_cpp import gpu_placement

    from workbench.strategy import StrategyError

    with pytest.raises(StrategyError) as caught:
        gpu_placement(fake_llama_cpp(info), Device("cuda", 0), -1)
    assert "\n" not in str(caught.value) and "not a CUDA build" in str(caught.value)


# --- quantized = "auto" on CUDA: the order, measured ---------------------------------------------------


def test_the_auto_order_judge_says_whether_the_documented_order_holds():
    order = _script("gpu_auto_order")
    holds, text = order.judge(("int4-weight-only", "bnb-nf4", "int8-weight-only"), {
        "int4-weight-only": 4.0, "bnb-nf4": 6.0, "int8-weight-only": 5.0})  # fmt: skip
    assert not holds and "int8-weight-only (5.00 ms) before bnb-nf4 (6.00 ms)" in text
    holds, text = order.judge(("int4-weight-only", "bnb-nf4"), {"int4-weight-only": 4.0, "bnb-nf4": 6.0})
    assert holds and "holds" in text
    holds, text = order.judge(("int4-weight-only", "bnb-nf4"), {"int4-weight-only": 4.0})
    assert holds is None and "bnb-nf4" in text  # a method that did not run: not judged


def test_the_auto_order_step_has_its_own_time_cap_and_runs_only_on_cuda():
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert "GPU_CHECK_AUTO_ORDER_S" in script and "gpu_auto_order.py" in script


# --- GPU memory: one kind per bar, device-wide figures kept apart -------------------------------------


def _cuda_standins(monkeypatch, *, allocated: int, nvml, free_gib: float = 30):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda index=0: allocated)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda index=0: allocated)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: SimpleNamespace(uuid="bbbb"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: (int(free_gib * 2**30), 141 * 2**30))
    monkeypatch.setattr("workbench.run.nvml.load", lambda: nvml)
    return torch


def test_the_nvml_process_figure_leaves_out_what_the_process_held_before_its_load_standin(monkeypatch):
    from test_cuda_standins import FakeNvml

    from workbench.run.clock import gpu_memory

    nvml = FakeNvml(["GPU-bbbb"])
    nvml.processes["GPU-bbbb"] = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=1536 * 2**20)]
    _cuda_standins(monkeypatch, allocated=0, nvml=nvml)
    # 512 MB before the load: the CUDA context (and the bandwidth probe's), which torch's peak lacks too
    memory = gpu_memory(Device("cuda", 0), free_before_mb=None, process_before_mb=512)
    assert memory.kind == "nvml_process" and memory.peak_mb() == 1024


def test_the_baseline_reading_is_taken_after_the_cuda_context_exists_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench.run import worker

    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "init", lambda: calls.append("init"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: calls.append("read") or (2**30, 2**31))
    monkeypatch.setattr("workbench.run.nvml.load", lambda: None)
    free, process = worker._cuda_baseline(Device("cuda", 0))
    assert free == 1024 and process is None
    assert calls == ["init", "empty_cache", "read"]  # context first, the probe's cached blocks gone


def test_a_runtime_draft_beside_a_torch_target_adds_its_delta_standin(monkeypatch):
    from workbench.run.clock import gpu_memory

    _cuda_standins(monkeypatch, allocated=2000 * 2**20, nvml=None)
    memory = gpu_memory(Device("cuda", 0), free_before_mb=None, outside_torch_mb=300)
    assert memory.peak_mb() == 2300
    assert memory.kind == "cuda_allocator_peak+runtime_draft"


def test_a_runtime_drafts_device_delta_is_measured_at_its_load_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench_strategies.speculative.runtime_drafts import device_delta_mb

    free = iter([10 * 2**30, 9 * 2**30])  # 1 GiB gone while the draft loaded
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: (next(free), 141 * 2**30))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda index=None: None)
    loaded, delta = device_delta_mb(Device("cuda", 0), lambda: "session")
    assert loaded == "session" and delta == 1024
    assert device_delta_mb(Device("cpu"), lambda: "s") == ("s", None)


def test_the_memory_chart_labels_each_bar_and_keeps_device_wide_ones_apart():
    from workbench.charts.memory import MemoryBar, MemoryChart, memory_groups

    bars = (
        MemoryBar("baseline", 2300, 2048, "cuda_allocator_peak"),
        MemoryBar("llama-cpp", 2900, 1900, "device_used_delta"),
        MemoryBar("ort-genai", 2500, 1900, "nvml_process"),
    )
    chart = MemoryChart(title="t", variants=tuple(b.variant for b in bars), bars=bars)
    rows = {r["variant"]: r for r in chart.rows()}
    assert rows["baseline"]["memory_label"] == "torch allocator peak"
    assert rows["llama-cpp"]["memory_scope"] == "device" and rows["baseline"]["memory_scope"] == "process"
    groups = memory_groups(bars)
    assert [names for _, names in groups] == [["baseline", "ort-genai"], ["llama-cpp"]]
    assert "not compared" in groups[1][0]


# --- the GPU check's figures catch a CPU fallback -----------------------------------------------------

FIG_SPEC = """
name = "figures"
repetitions = 1
warmup = 0

[[variants]]
name = "baseline"
strategy = "fake"

[[variants]]
name = "llama-cpp"
strategy = "fake"

[[workloads]]
name = "code"
limit = 1
max_new_tokens = 4
"""


@pytest.fixture
def gpu_run(tmp_path):
    """A recorded run dressed as an H200's: bf16 on cuda:0, llama.cpp offloaded; 8 ms a token."""
    from cli_helpers import invoke, write

    db = tmp_path / "gpu.db"
    assert invoke("run", write(tmp_path / "s.toml", FIG_SPEC), "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("select environment from runs").fetchone()
        environment = json.loads(text)
        environment["host"]["gpu"] = "NVIDIA H200"
        conn.execute("update runs set environment = ?", [json.dumps(environment)])
        conn.execute(
            "update variants set weights_mb = 2048, memory_bandwidth_gbs = 4000, strategy = 'baseline', "
            "device = 'cuda:0', dtype = 'bfloat16', backend = NULL"
        )
        conn.execute(
            "update variants set strategy = 'llama-cpp', dtype = 'F16', "
            "backend = 'llama.cpp CUDA offload on cuda:0 (17/17 layers)' where name = 'llama-cpp'"
        )
        conn.execute("update trials set peak_memory_mb = 2300, ttft_ms = 40, tpot_ms = 8")
    cpu = tmp_path / "cpu-ref.db"
    assert invoke("run", write(tmp_path / "c.toml", FIG_SPEC), "--db", cpu).exit_code == 0
    with sqlite3.connect(cpu) as conn:
        conn.execute("update trials set tpot_ms = 60")  # the same model decoding on the CPU
    return db, cpu


def _figures(run, *args: str) -> tuple[int, str]:
    import contextlib
    import io

    db, cpu = run
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = _script("gpu_figures").main(
            [str(db), "--expect", "baseline", "--expect", "llama-cpp", "--cpu-reference", str(cpu), *args]
        )
    return rc, out.getvalue()


def test_figures_of_a_true_gpu_run_pass(gpu_run):
    rc, said = _figures(gpu_run)
    assert rc == 0, said
    assert "baseline: device cuda:0, dtype bfloat16" in said
    assert "TPOT median 8.00 ms <= a third of the CPU's 60.00 ms" in said


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("update variants set device = 'cpu' where name = 'baseline'", "baseline: device cpu"),
        (
            "update variants set dtype = 'float32' where name = 'baseline'",
            "dtype float32 (expected bfloat16)",
        ),
        (
            "update variants set backend = 'llama.cpp CPU (GPU build, no layer or op offload)' "
            "where name = 'llama-cpp'",
            "llama-cpp: backend 'llama.cpp CPU",
        ),
        (
            "update variants set backend = 'llama.cpp CUDA offload on cuda:0 (6/17 layers: partial, the "
            "rest on the CPU)' where name = 'llama-cpp'",
            "partial",
        ),
        ("update trials set tpot_ms = 30", "TPOT median 30.00 ms <= a third of the CPU's 60.00 ms"),
    ],
)
def test_figures_fail_on_a_wrong_device_dtype_backend_or_a_cpu_speed(gpu_run, change, why):
    with sqlite3.connect(gpu_run[0]) as conn:
        conn.execute(change)
    rc, said = _figures(gpu_run)
    assert rc == 1
    assert any(line.lstrip().startswith("FAIL") and why in line for line in said.splitlines()), said


# --- torchao int8 leaves the process's global settings alone ------------------------------------------


@pytest.mark.parametrize("method", ["int8-weight-only", "int8-dynamic"])
def test_torchao_int8_configs_do_not_set_inductor_globals(method):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from workbench_strategies.quantized import QuantizedConfig, _torchao_config

    config = _torchao_config(method, QuantizedConfig(method=method), Device("cuda", 0), torch.bfloat16)
    assert config.set_inductor_config is False


# --- the GPU check's spec and versions ----------------------------------------------------------------


def _check_spec(work: Path) -> str:
    """The spec gpu_check.sh writes, its shell variables filled in as on CUDA."""
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    body = re.search(r"<<TOML\n(.*?)\nTOML\n", script, re.S)
    assert body is not None
    values = {"work": str(work), "label": "l", "device": "cuda", "reps": "2", "warmup": "1", "limit_chat": "3",
              "chat_tokens": "64", "long_tokens": "128", "limit": "2"}  # fmt: skip
    text = re.sub(r"\$(quant_variants|runtime_variants|compiled_variants)", "", body.group(1))
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], text)


def test_the_gpu_checks_spec_keeps_one_worker_per_variant(tmp_path):
    from workbench.spec.parse import parse_spec

    for model in ("large", "small"):
        (tmp_path / "models" / model).mkdir(parents=True)
        (tmp_path / "models" / model / "config.json").write_text("{}")
    spec = parse_spec(_check_spec(tmp_path))
    assert spec.workers == "one"  # per-repetition would respawn ~10 CUDA workers inside the run's cap


def test_the_check_reports_the_image_versions_and_whether_the_bundle_fits(tmp_path):
    bundle = _script("gpu_bundle")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    import zipfile

    with zipfile.ZipFile(wheels / "torchao-0.18.0-py3-none-any.whl", "w") as zf:
        zf.writestr("torchao-0.18.0.dist-info/METADATA", "Name: torchao\nRequires-Dist: torch>=2.12\n")
    ok, text = bundle.image_report(wheels, {"torch": "2.13.0", "transformers": "5.17.0"}, ["torchao"])
    assert ok and "torch 2.13.0" in text and "bundle fits" in text
    ok, text = bundle.image_report(wheels, {"torch": "2.11.0", "transformers": "5.17.0"}, ["torchao"])
    assert not ok and "\n" not in text and "torch>=2.12" in text and "torch 2.11.0" in text


# --- a runtime draft sampling on CUDA -------------------------------------------------------------------


def test_a_runtime_drafts_sampled_token_is_drawn_on_the_generators_device_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    import numpy as np
    from workbench_strategies.speculative import runtime_drafts

    generator = SimpleNamespace(device=torch.device("meta"))  # stand-in for the target's CUDA generator

    def multinomial(q, n, generator=None):  # as torch: the generator's device must be q's
        if q.device != generator.device:
            raise RuntimeError(f"Expected a '{q.device.type}' device type for generator")
        return torch.zeros(1, dtype=torch.long)

    monkeypatch.setattr(torch, "multinomial", multinomial)
    drafter = object.__new__(runtime_drafts.LlamaCppDrafter)
    drafter.vocab_limit = 4
    drafter.sampler = SimpleNamespace(greedy=False, generator=generator, probs=lambda x: torch.softmax(x, -1))
    probs: list = []
    assert drafter._choose(np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32), probs) == 0
    assert probs[0].device.type == "meta"


def test_the_report_says_when_the_variants_peaks_are_not_one_kind():
    from workbench.report.run_report import memory_kinds_line

    alike = [SimpleNamespace(name="a", memory_kind="cuda_allocator_peak")] * 2
    assert memory_kinds_line(alike) is None
    mixed = [
        SimpleNamespace(name="baseline", memory_kind="cuda_allocator_peak"),
        SimpleNamespace(name="llama-cpp", memory_kind="device_used_delta"),
    ]
    line = memory_kinds_line(mixed)
    assert line is not None and "baseline: torch allocator peak" in line
    assert "device-wide, not compared with the others: llama-cpp" in line


def test_the_image_report_does_not_count_the_checkouts_own_metadata(tmp_path, monkeypatch):
    bundle = _script("gpu_bundle")
    # stand-in for the checkout's llm_workbench.egg-info (a name nothing else installs)
    (tmp_path / "checkout_only.egg-info").mkdir()
    (tmp_path / "checkout_only.egg-info" / "PKG-INFO").write_text("Name: checkout-only\nVersion: 0.1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(bundle, "ROOT", tmp_path.parent)
    assert "checkout-only" in bundle.installed_versions()  # seen when on sys.path and not the checkout
    monkeypatch.setattr(bundle, "ROOT", tmp_path)
    assert "checkout-only" not in bundle.installed_versions()


def test_the_auto_order_spec_is_one_quantized_variant_per_available_method(tmp_path):
    from workbench_strategies.quantized import AUTO_ORDER_CUDA, method_unavailable_reason

    from workbench.spec.parse import parse_spec

    (tmp_path / "large").mkdir()
    (tmp_path / "large" / "config.json").write_text("{}")
    spec = parse_spec(_script("gpu_auto_order").spec(str(tmp_path / "large"), "cpu"))
    available = [m for m in AUTO_ORDER_CUDA if not method_unavailable_reason(m, "cpu")]
    assert [v.name for v in spec.variants] == [f"auto-order {m}" for m in available]
    assert spec.workers == "one" and spec.quality is False
