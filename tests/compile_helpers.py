"""A stand-in for a compiled strategy whose graphs change shape with the prompt, so that a measured
trial recompiles (tests/test_compile.py); imported by the worker as ``tests.compile_helpers``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.strategy import Device, Output, Probe, Request, Session, Variant
from workbench.testing import FakeSession, FakeStrategy


class RecompilingSession(FakeSession):
    """The fake's generation, plus a torch.compile'd function (the eager backend: no code generated)
    run on a tensor as long as the prompt: a prompt length ``prepare`` did not see compiles a graph."""

    def __init__(self, config: Any) -> None:
        import torch

        super().__init__(config)
        self.fn = torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        import torch

        self.fn(torch.ones(prompt_lengths[0]))  # only the shortest prompt's shape: the others recompile

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch

        self.fn(torch.ones(len(request.input_ids)))
        return super().generate(request, probe)


class RecompilingStrategy(FakeStrategy):
    compile_refusal = None

    def load(self, variant: Variant[Any], device: Device) -> Session:
        return RecompilingSession(variant.config)
