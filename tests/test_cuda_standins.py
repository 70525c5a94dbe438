"""The CUDA paths, right before they ever run, exercised on a CPU machine through **stand-ins** for
what only a GPU has: a fake ``llama_cpp`` module (its ``llama_supports_gpu_offload``), a fake NVML
module, monkeypatched ``torch.cuda`` calls. Every stand-in is named as such. What the stand-ins cannot
prove (that the real calls answer as modelled) is checked on a GPU by ``scripts/gpu_check.sh``
(``tests/test_cuda.py`` and the figures it asserts)."""

from __future__ import annotations

import contextlib
import io
import json
import time
import types
from types import SimpleNamespace

import pytest

from workbench.core.device import Device
from workbench.run import events as ev
from workbench.run.disturbance import MachineWatch, judge
from workbench.store.records import TrialRecord

# --- llama.cpp: where it runs is decided, and recorded ----------------------------------------------


class _Llama:
    """Stand-in for ``llama_cpp.Llama``: only its signature is read."""

    def __init__(self, model_path: str, n_gpu_layers: int = 0, main_gpu: int = 0, op_offload=None) -> None:
        pass


def fake_llama_cpp(gpu_offload: bool, op_offload: bool = True) -> types.SimpleNamespace:
    """A stand-in ``llama_cpp`` module: a CPU-only or a GPU build."""
    llama = _Llama
    if not op_offload:

        class _OldLlama:
            def __init__(self, model_path: str, n_gpu_layers: int = 0, main_gpu: int = 0) -> None:
                pass

        llama = _OldLlama  # type: ignore[assignment]
    return SimpleNamespace(
        __version__="0.3.36-standin",
        llama_supports_gpu_offload=lambda: gpu_offload,
        llama_print_system_info=lambda: (
            b"CUDA : ARCHS = 900 | CPU : AVX2 = 1 |" if gpu_offload else b"CPU : |"
        ),
        LLAMA_SPLIT_MODE_NONE=0,
        Llama=llama,
    )


def test_llama_cpp_refuses_a_cuda_variant_on_a_build_without_gpu_offload_standin():
    from workbench_strategies.llama_cpp import gpu_placement

    from workbench.strategy import StrategyError

    with pytest.raises(StrategyError) as caught:
        gpu_placement(fake_llama_cpp(gpu_offload=False), Device("cuda", 0), -1)
    message = str(caught.value)
    assert "\n" not in message and "CPU-only build" in message
    assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in message  # how to build it with CUDA


def test_llama_cpp_cpu_variant_on_a_gpu_build_offloads_nothing_standin():
    from workbench_strategies.llama_cpp import gpu_placement

    placement = gpu_placement(fake_llama_cpp(gpu_offload=True), Device("cpu"), -1)
    assert placement.kwargs == {"n_gpu_layers": 0, "op_offload": False, "flash_attn": False}  # no offload
    assert placement.backend == "llama.cpp CPU (GPU build, no layer or op offload)"
    cpu_only = gpu_placement(fake_llama_cpp(gpu_offload=False), Device("cpu"), -1)
    assert (
        cpu_only.kwargs == {"n_gpu_layers": 0, "flash_attn": False} and "CPU-only build" in cpu_only.backend
    )


def test_llama_cpp_gpu_build_that_cannot_turn_op_offload_off_is_refused_for_cpu_standin():
    from workbench_strategies.llama_cpp import gpu_placement

    from workbench.strategy import StrategyError

    with pytest.raises(StrategyError, match="op offload"):
        gpu_placement(fake_llama_cpp(gpu_offload=True, op_offload=False), Device("cpu"), -1)


def test_llama_cpp_honours_the_cuda_index_as_main_gpu_standin():
    from workbench_strategies.llama_cpp import gpu_placement

    placement = gpu_placement(fake_llama_cpp(gpu_offload=True), Device("cuda", 1), 20)
    assert placement.kwargs == {"n_gpu_layers": 20, "main_gpu": 1, "split_mode": 0, "flash_attn": True}
    assert placement.backend == "llama.cpp CUDA offload on cuda:1 (20 layers asked)"


def test_the_backend_a_session_reports_reaches_the_variants_row(tmp_path):
    from workbench.store import Store

    loaded = ev.Loaded(device="cuda:0", dtype="Q4_1", load_ms=1.0, backend="llama.cpp GPU offload on cuda:0")
    assert loaded.variant_fields()["backend"] == "llama.cpp GPU offload on cuda:0"
    assert ev.parse_event(loaded.to_json()) == loaded
    with Store(tmp_path / "r.db") as store:
        assert "backend" in store.db["variants"].columns_dict
        assert "gpu_throttle" in store.db["trials"].columns_dict


# --- ONNX Runtime GenAI's CUDA package -------------------------------------------------------------


def test_ort_genai_version_is_found_under_the_cuda_distribution_standin(monkeypatch):
    from importlib import metadata

    from workbench_strategies import ort_genai

    def version(dist: str) -> str:  # stand-in: only the CUDA package is installed
        if dist == "onnxruntime-genai-cuda":
            return "0.9.2"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(ort_genai.metadata, "version", version)
    assert ort_genai.genai_version() == "0.9.2"


def test_ort_genai_cuda_provider_gets_the_variants_device_id_standin():
    from workbench_strategies.ort_genai import configure_provider

    calls: list[tuple] = []
    config = SimpleNamespace(  # stand-in for og.Config
        clear_providers=lambda: calls.append(("clear",)),
        append_provider=lambda p: calls.append(("append", p)),
        set_provider_option=lambda p, k, v: calls.append(("option", p, k, v)),
    )
    configure_provider(config, "cuda", 2)
    assert calls == [("clear",), ("append", "cuda"), ("option", "cuda", "device_id", "2")]
    calls.clear()
    configure_provider(config, "cpu", 0)
    assert calls == [("clear",)]


# --- the worker: no CUDA context for a CPU variant; a CUDA error is a load failure; load_ms synced ----


def test_a_cpu_variants_environment_creates_no_cuda_context_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench.run.environment import snapshot

    def context(*args, **kwargs):  # stand-in: on a GPU box this would create a CUDA context
        raise AssertionError("a CUDA context was created for a CPU variant")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", context)
    monkeypatch.setattr(torch.cuda, "device_count", context)
    env = snapshot(Device("cpu"))
    assert "gpu" not in env and env["device"] == "cpu"
    assert env["matmul_precision"] in ("highest", "high", "medium")


def _job(tmp_path):
    from workbench.run.plan import plan_run
    from workbench.spec.parse import parse_spec

    spec = parse_spec(
        'name = "w"\nrepetitions = 1\nwarmup = 0\n[[variants]]\nname = "a"\nstrategy = "fake"\n'
        'device = "cpu"\n[[workloads]]\nname = "code"\nlimit = 1\nmax_new_tokens = 2\n'
    )
    (plan,) = plan_run(spec)
    return {"variant": plan.variant.to_dict(), "trials": [t.to_dict() for t in plan.trials]}


def _run_worker(tmp_path, monkeypatch) -> tuple[int, list[dict]]:
    from workbench.run import worker

    out = io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO('{"close": true}\n'))
    monkeypatch.setenv("WORKBENCH_BANDWIDTH_GBS", "10")
    rc = worker._run(_job(tmp_path), worker._Events(out), lambda: False)
    return rc, [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_cuda_init_error_in_the_environment_is_a_load_failure_standin(tmp_path, monkeypatch):
    def cuda_error(device=None):  # stand-in for torch.cuda failing to initialise
        raise RuntimeError("CUDA error: initialization error")

    monkeypatch.setattr("workbench.run.environment.snapshot", cuda_error)
    rc, events = _run_worker(tmp_path, monkeypatch)
    assert rc == 1
    assert events[-1]["event"] == "load_failed" and "initialization error" in events[-1]["error"]


def test_load_ms_includes_the_device_synchronise_after_load_standin(tmp_path, monkeypatch):
    def slow_sync(self):  # stand-in: kernels the load queued take 0.3 s to finish
        return lambda: time.sleep(0.3)

    monkeypatch.setattr(Device, "synchronizer", slow_sync)
    rc, events = _run_worker(tmp_path, monkeypatch)
    loaded = next(e for e in events if e["event"] == "loaded")
    assert rc == 0 and loaded["load_ms"] >= 300


# --- GPU memory of runtimes other than torch -------------------------------------------------------


class FakeNvml:
    """Stand-in for ``pynvml``: GPUs by UUID and PCI bus id, in NVML's own order, with per-process
    memory, clock-event reasons and violation counters that the test moves."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, uuids: list[str]) -> None:
        self.uuids = uuids
        self.processes: dict[str, list] = {u: [] for u in uuids}
        self.reasons = 0
        self.violations = {0: 0, 1: 0}

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.uuids:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return ("handle", uuid)

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", self.uuids[index])

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self.processes[handle[1]]

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 60

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        return SimpleNamespace(referenceTime=0, violationTime=self.violations[policy])

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H200 (stand-in)"

    def nvmlSystemGetDriverVersion(self):
        return "570.00"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980 if clock == 1 else 3201


def test_the_gpu_is_matched_by_uuid_not_by_index_standin():
    from workbench.run.nvml import handle_for_cuda

    nvml = FakeNvml(["GPU-aaaa", "GPU-bbbb"])
    # cuda:0 is NVML's second GPU (CUDA_VISIBLE_DEVICES=1, or another device order)
    props = SimpleNamespace(uuid="bbbb")
    assert handle_for_cuda(nvml, props) == ("handle", "GPU-bbbb")
    assert handle_for_cuda(nvml, SimpleNamespace(uuid="cccc")) is None  # never guessed from the index


def _cuda_standins(monkeypatch, *, allocated: int, nvml):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda index=0: allocated)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: SimpleNamespace(uuid="bbbb"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: (30 * 2**30, 141 * 2**30))
    monkeypatch.setattr("workbench.run.nvml.load", lambda: nvml)
    return torch


def test_a_runtime_outside_torch_is_measured_by_nvml_per_process_standin(monkeypatch):
    import os

    from workbench.run.clock import gpu_memory

    nvml = FakeNvml(["GPU-aaaa", "GPU-bbbb"])
    nvml.processes["GPU-bbbb"] = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=1536 * 2**20)]
    _cuda_standins(monkeypatch, allocated=0, nvml=nvml)  # llama.cpp / ORT: torch's allocator holds nothing
    memory = gpu_memory(Device("cuda", 0), free_before_mb=None)
    assert memory.kind == "nvml_process"
    assert memory.peak_mb() == 1536 and memory.footprint_mb() == 1536


def test_without_nvml_a_runtime_outside_torch_is_the_device_used_delta_standin(monkeypatch):
    from workbench.run.clock import gpu_memory

    _cuda_standins(monkeypatch, allocated=0, nvml=None)
    memory = gpu_memory(Device("cuda", 0), free_before_mb=32 * 1024)
    assert memory.kind == "device_used_delta"
    assert memory.peak_mb() == 2 * 1024  # 32 GiB free before the load, 30 GiB now


def test_a_torch_model_keeps_the_allocator_peak_standin(monkeypatch):
    from workbench.run.clock import gpu_memory

    _cuda_standins(monkeypatch, allocated=10 * 2**20, nvml=FakeNvml(["GPU-bbbb"]))
    assert gpu_memory(Device("cuda", 0), free_before_mb=None).kind == "cuda_allocator_peak"


# --- GPU throttling ----------------------------------------------------------------------------------


def test_a_throttle_that_came_and_went_mid_unit_is_seen_by_the_violation_counters_standin():
    nvml = FakeNvml(["GPU-bbbb"])
    watch = MachineWatch(nvml=nvml, handle=("handle", "GPU-bbbb"))
    mark = watch.mark()
    nvml.violations[0] += 12_000_000  # 12 ms held down by the power cap, over by the unit's end
    figures = watch.figures(mark)
    assert figures["gpu_throttle"] == "power violation 12 ms"
    gpu = {k: v for k, v in figures.items() if k.startswith("gpu")}
    assert judge(TrialRecord(**gpu)) == "GPU clocks held down while it ran: power violation 12 ms"


def test_an_idle_downclock_is_not_a_disturbance_standin():
    nvml = FakeNvml(["GPU-bbbb"])
    nvml.reasons = 0x1  # GpuIdle: what a read at a unit's edge can catch
    watch = MachineWatch(nvml=nvml, handle=("handle", "GPU-bbbb"))
    figures = watch.figures(watch.mark())
    assert figures["gpu_throttle"] == ""
    # the clock rule is not applied when NVML says nothing held the clocks down
    assert judge(TrialRecord(gpu_throttle="", gpu_clock_mhz=300), best_clock_mhz=1980) is None
    nvml.reasons = 0x4 | 0x40
    assert watch.figures(watch.mark())["gpu_throttle"] == "software power cap, hardware thermal slowdown"


def test_gpu_facts_for_the_environment_standin():
    from workbench.run.nvml import gpu_facts

    facts = gpu_facts(FakeNvml(["GPU-bbbb"]), ("handle", "GPU-bbbb"))
    assert facts["gpu"] == "NVIDIA H200 (stand-in)" and facts["cuda_driver"] == "570.00"
    assert facts["gpu_power_limit_w"] == 700 and facts["gpu_sm_clock_max_mhz"] == 1980


# --- quantization on CUDA ----------------------------------------------------------------------------


def test_quantized_auto_on_cuda_follows_the_cuda_order():
    pytest.importorskip("torchao")
    pytest.importorskip("bitsandbytes")
    from workbench_strategies.quantized import AUTO_ORDER, resolve_method

    assert resolve_method("auto", "cuda", "bfloat16") == "int4-weight-only"  # tinygemm
    assert resolve_method("auto", "cuda", "float16") == "bnb-nf4"  # tinygemm needs bfloat16
    assert resolve_method("auto", "cpu", "float32") == AUTO_ORDER[0]


# --- the device a measurement waits for ----------------------------------------------------------------


def test_the_speculative_timer_synchronises_the_variants_device_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench_strategies.speculative.loop import _Timer

    synced: list = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    _Timer(torch.device("cuda", 1)).now()
    assert synced == [torch.device("cuda", 1)]


def test_the_bandwidth_events_are_recorded_on_the_measured_device_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench.run import bandwidth

    current: list = [0]
    recorded_on: list = []

    @contextlib.contextmanager
    def device(dev):  # stand-in for torch.cuda.device: makes ``dev`` current
        before, current[0] = current[0], torch.device(dev).index
        try:
            yield
        finally:
            current[0] = before

    class Event:  # stand-in for torch.cuda.Event: records on the current device
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            recorded_on.append(current[0])

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return 0.5  # ms

    real_empty = torch.empty
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch, "empty", lambda n, dtype, device: real_empty(16, dtype=dtype))
    monkeypatch.setattr(bandwidth, "_BUDGET_S", 0.01)
    measured = bandwidth._measure_cuda("cuda:1")
    assert recorded_on and set(recorded_on) == {1}
    assert measured.gbs == pytest.approx(2 * bandwidth._CUDA_BUFFER_BYTES / 0.0005 / 1e9)


def test_without_pynvml_the_gpu_facts_come_from_nvidia_smi_standin(monkeypatch):
    torch = pytest.importorskip("torch")
    import subprocess

    from workbench.run import environment

    asked: list = []

    def nvidia_smi(command, **kwargs):  # stand-in for nvidia-smi on an H200
        asked.append(command)
        line = "570.00, GPU-bbbb, 00000000:19:00.0, 1980, 3201, 1980, [N/A], 700.00\n"
        return subprocess.CompletedProcess(command, 0, stdout=line, stderr="")

    props = SimpleNamespace(name="NVIDIA H200", total_memory=141 * 2**30, major=9, minor=0, uuid="bbbb")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr("workbench.run.nvml.load", lambda: None)
    monkeypatch.setattr(subprocess, "run", nvidia_smi)
    facts = environment._cuda_facts(torch, 0)
    assert asked[0][-2:] == ["-i", "GPU-bbbb"]  # the device by UUID, not by index
    assert facts["gpu"] == "NVIDIA H200" and facts["cuda_driver"] == "570.00"
    assert facts["gpu_power_limit_w"] == 700 and facts["gpu_sm_clock_max_mhz"] == 1980
    assert "gpu_app_sm_clock_mhz" not in facts  # [N/A]
