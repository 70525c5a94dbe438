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


class ColdCompileSession(FakeSession):
    """A compile that costs more in a variant's first worker (cold caches) than in its later ones
    (``WORKBENCH_WORKER`` > 0: inductor's caches warm): 400 ms against 40 ms, no torch."""

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        import os
        import time

        time.sleep(0.4 if os.environ.get("WORKBENCH_WORKER", "0") == "0" else 0.04)


class ColdCompileStrategy(FakeStrategy):
    compile_refusal = None

    def load(self, variant: Variant[Any], device: Device) -> Session:
        return ColdCompileSession(variant.config)


class FallingBackSession(FakeSession):
    """A torch.compile'd function (the eager backend) run on a tensor as long as the prompt, with
    dynamo's recompile limit at 2: the first prompt length is compiled in ``prepare``, the second
    recompiles, the third hits the limit and runs eagerly from then on (dynamo's fallback)."""

    def __init__(self, config: Any) -> None:
        import torch

        super().__init__(config)
        self.fn = torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        import torch
        import torch._dynamo.config

        torch._dynamo.config.recompile_limit = 2
        self.fn(torch.ones(prompt_lengths[0]))

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch

        self.fn(torch.ones(len(request.input_ids)))
        return super().generate(request, probe)


class FallingBackStrategy(FakeStrategy):
    compile_refusal = None

    def load(self, variant: Variant[Any], device: Device) -> Session:
        return FallingBackSession(variant.config)


class ReRecordingSession(FakeSession):
    """A stand-in for ``reduce-overhead`` on a GPU (none here): the prompt ``p2`` makes
    its trial record a CUDA graph, announced as torch's CUDA-graph trees announce each recording
    (dynamo's callback handler, trigger CUDAGRAPH_RECORDING); the others replay."""

    def __init__(self, config: Any) -> None:
        import torch

        super().__init__(config)
        self.fn = torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        import torch

        self.fn(torch.ones(4))  # the one graph every trial runs

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch
        from torch._dynamo.callback import CallbackTrigger, callback_handler

        if request.prompt.id == "p2":
            with callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"):
                self.fn(torch.ones(4))
        else:
            self.fn(torch.ones(4))
        return super().generate(request, probe)


class ReRecordingStrategy(FakeStrategy):
    compile_refusal = None

    def load(self, variant: Variant[Any], device: Device) -> Session:
        return ReRecordingSession(variant.config)
