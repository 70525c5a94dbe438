"""A known, real difference for the design's benchmarks: the baseline, made ``slowdown`` slower.

``strategy = "benchmarks.slowed:SlowedBaseline"`` (run from the repository root) is the ``baseline``
strategy whose every probe step first spins the CPU for ``slowdown`` × the time since the previous
step (or since ``generate`` began, for the first token): the same model, the same work, the same
noise, and on top a cost that is exactly ``slowdown`` of it — in CPU, as a slower kernel would be,
not in sleep. Its e2e, TTFT and decode are ``1 + slowdown`` times the baseline's, so a run that
compares the two should find a speed-up of ``1 / (1 + slowdown)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from workbench_strategies.baseline import BaselineSession
from workbench_strategies.hf_session import torch_unavailable_reason

from workbench.strategy import Output, Probe, Request, Session, Strategy, field_help


@dataclass
class SlowedConfig:
    slowdown: float = field_help("extra CPU time per step, as a share of the step (0.05 = 5 %)", default=0.05)


class _SpinningProbe:
    """The runner's probe, with ``slowdown`` × the step's own time spun before each step."""

    def __init__(self, probe: Probe, slowdown: float) -> None:
        self._probe = probe
        self._slowdown = slowdown
        self._last = time.perf_counter()

    def step(self, *args: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        until = now + self._slowdown * (now - self._last)
        while time.perf_counter() < until:
            pass
        self._last = time.perf_counter()
        self._probe.step(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._probe, name)


class SlowedSession(BaselineSession):
    slowdown = 0.05

    def generate(self, request: Request, probe: Probe) -> Output:
        return super().generate(request, _SpinningProbe(probe, self.slowdown))  # type: ignore[arg-type]


class SlowedBaseline(Strategy[SlowedConfig]):
    name = "slowed-baseline"
    description = "The baseline, made `slowdown` slower by spinning the CPU at every step (benchmarks)"
    Config = SlowedConfig

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Any, device: Any) -> Session:
        from workbench_strategies._hf import load_hf_model

        session = SlowedSession(load_hf_model(variant, device))
        session.slowdown = float(variant.config.slowdown)
        return session
