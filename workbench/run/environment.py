"""The environment snapshot stored with every run: what the numbers were measured on."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
from typing import Any

from workbench.core.device import Device

__all__ = ["ISA_FLAGS", "cpu_flags", "package_versions", "snapshot"]

_PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "safetensors",
    "gguf",
    "tokenizers",
    "numpy",
    "llm-workbench",
    # the runtimes and kernels the strategies call: a changed version changes the kernels that run
    "torchao",
    "bitsandbytes",
    "gptqmodel",
    "triton",
    "llama-cpp-python",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-genai",
    "onnxruntime-genai-cuda",
    "nvidia-ml-py",
)

#: CPU instruction-set extensions that change which kernels run (``/proc/cpuinfo`` flag names): int8
#: (VNNI), bf16 and AMX kernels exist only where these do, and oneDNN, llama.cpp, ONNX Runtime and
#: torchao pick their paths by them. ``isa_summary`` names the best of them in a line.
ISA_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
    "sve",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags(cpuinfo: str | None = None) -> list[str] | None:
    """The :data:`ISA_FLAGS` this CPU has (``/proc/cpuinfo``'s ``flags`` / ``Features`` line, or
    ``cpuinfo`` given); ``None`` where the flags cannot be read (not Linux)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in ("flags", "Features") and ":" in line:
            present = set(line.split(":", 1)[1].split())
            return [flag for flag in ISA_FLAGS if flag in present]
    return None


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        import psutil

        return round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:
        return None


def package_versions() -> dict[str, str]:
    """The versions of the libraries a run's numbers depend on, as installed in this interpreter."""
    versions = {}
    for name in _PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def snapshot(device: Device | None = None) -> dict[str, Any]:
    """CPU and its instruction set, GPU, driver, library versions, thread count and matmul precision.
    Imports torch only if it is loaded, and touches CUDA only for a CUDA device (whose context the
    variant creates anyway): a CPU variant's worker creates no CUDA context (hundreds of MB of GPU
    memory and its driver's memory in the variant's RSS). GPU facts come from NVML when ``pynvml``
    is installed (no context needed), matched to the CUDA device by UUID / PCI bus id."""
    env: dict[str, Any] = {
        "host": platform.node(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpu": _cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "packages": package_versions(),
        # how OpenMP threads wait at a barrier, when set (it moves CPU time and wall time: see
        # docs/analysis.md "Processes")
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch_threads"] = torch.get_num_threads()
        env["torch_cuda"] = torch.version.cuda
        # float32 matmuls: "highest" (IEEE), "high" (TF32 on Ampere+), "medium" (bf16)
        with contextlib.suppress(Exception):
            env["matmul_precision"] = torch.get_float32_matmul_precision()
        with contextlib.suppress(Exception):
            env["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
            env["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        if device is not None and device.is_cuda:
            env.update(_cuda_facts(torch, device.index or 0))
    if device is not None:
        env["device"] = str(device)
    return env


def _cuda_facts(torch: Any, index: int) -> dict[str, Any]:
    """The CUDA device's properties (torch) and NVML's name, driver, clocks and power limit."""
    props = torch.cuda.get_device_properties(index)
    facts: dict[str, Any] = {
        "gpu": props.name,
        "gpu_memory_gb": round(props.total_memory / 2**30, 1),
        "gpu_capability": f"{props.major}.{props.minor}",
        "gpu_count": torch.cuda.device_count(),
    }
    from workbench.run.nvml import gpu_facts, handle_for_cuda, load

    nvml = load()
    handle = handle_for_cuda(nvml, props) if nvml is not None else None
    if handle is not None:
        facts.update(gpu_facts(nvml, handle))
    else:  # no pynvml: nvidia-smi says the same of the device with this UUID
        uuid = getattr(props, "uuid", None)
        facts.update(_nvidia_smi_facts(f"GPU-{uuid}" if uuid is not None else None))
    if "cuda_driver" not in facts:
        facts["cuda_driver"] = _cuda_driver()
    return facts


#: nvidia-smi's query fields and the environment keys they fill (``gpu_facts``' keys)
_SMI_FIELDS = (
    ("driver_version", "cuda_driver", str),
    ("uuid", "gpu_uuid", str),
    ("pci.bus_id", "gpu_pci_bus_id", str),
    ("clocks.max.sm", "gpu_sm_clock_max_mhz", int),
    ("clocks.max.mem", "gpu_mem_clock_max_mhz", int),
    ("clocks.sm", "gpu_sm_clock_mhz", int),
    ("clocks.applications.graphics", "gpu_app_sm_clock_mhz", int),
    ("enforced.power.limit", "gpu_power_limit_w", float),
)


def _nvidia_smi_facts(uuid: str | None) -> dict[str, Any]:
    """Driver, UUID, PCI bus id, clocks and power limit of the GPU ``uuid`` from ``nvidia-smi``
    (when ``pynvml`` is not installed); ``{}`` without a UUID or an ``nvidia-smi`` that answers."""
    import subprocess

    if uuid is None:
        return {}
    query = ",".join(field for field, _, _ in _SMI_FIELDS)
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", uuid],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return {}
    facts: dict[str, Any] = {}
    for (_, key, kind), value in zip(_SMI_FIELDS, lines[0].split(","), strict=False):
        value = value.strip()
        try:
            facts[key] = round(float(value)) if kind is not str else value
        except ValueError:  # "[N/A]", "[Not Supported]"
            continue
    return facts


def _cuda_driver() -> str | None:
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None
