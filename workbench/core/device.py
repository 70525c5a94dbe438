"""Devices: what a variant's ``device`` names (``auto``, ``cpu``, ``mps``, ``cuda:N``), resolved on the
machine that runs it, and how to wait for its queued work.

torch is imported lazily: a variant that needs no model (the fake strategy) never imports it.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass

from workbench.core.errors import SpecError

__all__ = ["Device", "check_device_name", "resolve_device"]

_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class Device:
    """A resolved device: ``cpu``, ``mps`` or ``cuda`` with an index."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return f"{self.type}:{self.index}" if self.index is not None else self.type

    @property
    def is_cuda(self) -> bool:
        return self.type == "cuda"

    def synchronizer(self) -> Callable[[], None]:
        """A zero-argument function that blocks until queued device work is done."""
        if self.type == "cuda":
            import torch

            index = self.index or 0
            return lambda: torch.cuda.synchronize(index)
        if self.type == "mps":
            import torch

            return torch.mps.synchronize
        return _noop


def _noop() -> None:
    return None


def check_device_name(value: str) -> str:
    if not _DEVICE_RE.match(value):
        raise SpecError(f"device must be auto, cpu, mps, cuda or cuda:N, got {value!r}")
    return value


def resolve_device(name: str, *, needs_torch: bool = True) -> Device:
    """Turn a spec's ``device`` value into a :class:`Device` available here.

    ``auto`` picks CUDA, then MPS, then the CPU — falling back to the CPU cleanly when torch has no
    GPU support. Asking explicitly for a device that is not here is an error naming what is.
    ``cpu`` asks torch nothing: ``torch.cuda.is_available()`` would start the CUDA driver in every CPU
    worker of a GPU machine.
    """
    check_device_name(name)
    if name == "cpu":
        return Device("cpu")
    if not needs_torch or importlib.util.find_spec("torch") is None:
        if name == "auto":
            return Device("cpu")
        raise SpecError(f"device {name!r} needs torch, which is not installed")
    import torch

    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        if cuda:
            return Device("cuda", torch.cuda.current_device())
        if mps:
            return Device("mps")
        return Device("cpu")
    if name == "mps":
        if not mps:
            raise SpecError("device 'mps' asked for, but this machine has no Apple GPU available to torch")
        return Device("mps")
    index = int(name.split(":", 1)[1]) if ":" in name else 0
    if not cuda:
        raise SpecError(
            f"device {name!r} asked for, but torch sees no CUDA GPU here "
            f'(torch {torch.__version__}; a CPU-only build?). Use device = "auto" to fall back to the CPU.'
        )
    if index >= torch.cuda.device_count():
        raise SpecError(
            f"device {name!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist"
        )
    return Device("cuda", index)
