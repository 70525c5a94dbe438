"""The environment snapshot stored with every run: what the numbers were measured on."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
from typing import Any

from workbench.core.device import Device

__all__ = ["package_versions", "snapshot"]

_PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "safetensors",
    "gguf",
    "tokenizers",
    "numpy",
    "llm-workbench",
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
    """CPU, GPU, driver, library versions and thread count. Imports torch only if it is loaded."""
    env: dict[str, Any] = {
        "host": platform.node(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpu": _cpu_model(),
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
        if torch.cuda.is_available():
            index = device.index if device is not None and device.is_cuda and device.index is not None else 0
            props = torch.cuda.get_device_properties(index)
            env["gpu"] = props.name
            env["gpu_memory_gb"] = round(props.total_memory / 2**30, 1)
            env["gpu_capability"] = f"{props.major}.{props.minor}"
            env["gpu_count"] = torch.cuda.device_count()
            env["cuda_driver"] = _cuda_driver()
    if device is not None:
        env["device"] = str(device)
    return env


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
