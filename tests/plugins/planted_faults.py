"""Planted faults: lossless strategies with a bug of a known kind and size, registered through the
``workbench.strategies`` entry point like any third-party plugin, so that a real run (its worker
processes, its quality pass) executes them. The equivalence check (docs/metrics.md, "Equivalence")
must call each of them not equivalent once it changed an output (tests/test_planted_faults.py);
benchmarks/detection_floor.py sweeps the tolerance of the first one.

Each fault is the honest built-in strategy with one thing wrong, installed by wrapping, never by
editing strategies/: the session the built-in strategy loads gets a ``generate`` that switches the
fault on for the duration of the call (a module function of the shared loop replaced, the target
model's ``forward`` wrapped, an overridden method) and off again after it, so the session's other
methods (the quality pass's ``score`` and ``score_shaped``) stay honest: the check cannot see a fault
through them, only through what the variant generated. Anything that calls the session's
``generate`` (a measured trial, a traced replay) runs the fault through the real draft → verify loop,
the real prefix cache, the real compiled decoder.

- ``planted-tolerance`` (speculative): greedy acceptance with a tolerance: a draft token is accepted
  when its target log-probability is within ``tolerance`` nats of the argmax's (honest: equal to it).
- ``planted-stale-kv`` (speculative): after a rejected draft, the target's KV cache is cropped to one
  position too many: the first rejected draft token's keys/values stay, and every later position is
  shifted by one behind it.
- ``planted-position`` (speculative): every verify pass of more than one token runs with position
  ids ``offset`` too high (RoPE sees the chunk one place further from the cache than it is).
- ``planted-prefix`` (prefix-cache): the reused prefix is wrong: ``short`` copies one position fewer
  than the prompt tokens it skips (the cache lacks the last shared token, the suffix sits one place
  early), ``scaled`` multiplies the copied keys by ``scale``.
- ``planted-compiled`` (baseline with ``compile``): the compiled decode step adds ``nudge`` to the
  runner-up's logit at decode step ``step`` of every request (0: honest). ``backend = "eager"``
  compiles with dynamo's eager backend (no inductor code generation: seconds, not a minute, for the
  tests; the static cache and the compiled step's call path are the same).

:func:`write_distribution` writes the ``planted_faults-0.dist-info`` that registers them; a run
sees them with that folder and this module's folder on ``PYTHONPATH`` (workers are subprocesses).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workbench_strategies.baseline import BaselineConfig, BaselineStrategy
from workbench_strategies.prefix_cache import PrefixCacheConfig, PrefixCacheStrategy
from workbench_strategies.speculative import SpeculativeConfig, SpeculativeStrategy

from workbench.strategy import Device, Session, StrategyError, Variant, field_help

__all__ = [
    "ENTRY_POINTS",
    "PlantedCompiled",
    "PlantedPosition",
    "PlantedPrefix",
    "PlantedStaleKV",
    "PlantedTolerance",
    "write_distribution",
]

#: strategy name → class, as the distribution registers them
ENTRY_POINTS = {
    "planted-tolerance": "planted_faults:PlantedTolerance",
    "planted-stale-kv": "planted_faults:PlantedStaleKV",
    "planted-position": "planted_faults:PlantedPosition",
    "planted-prefix": "planted_faults:PlantedPrefix",
    "planted-compiled": "planted_faults:PlantedCompiled",
}

FOLDER = Path(__file__).resolve().parent


def write_distribution(folder: Path) -> list[str]:
    """Write ``planted_faults-0.dist-info`` (METADATA, entry_points.txt) into ``folder``; returns the
    paths a process needs on ``sys.path`` / ``PYTHONPATH`` to see the plugins: ``folder`` and this
    module's folder."""
    info = Path(folder) / "planted_faults-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: planted-faults\nVersion: 0\n", encoding="utf-8"
    )
    lines = [f"{name} = {target}" for name, target in ENTRY_POINTS.items()]
    (info / "entry_points.txt").write_text(
        "[workbench.strategies]\n" + "\n".join(lines) + "\n", encoding="utf-8"
    )
    return [str(folder), str(FOLDER)]


@contextlib.contextmanager
def _replaced(module: Any, name: str, value: Any) -> Iterator[None]:
    """``module.name`` is ``value`` inside the block. The name must exist: a renamed function in the
    shared loop fails here, loudly, rather than planting nothing."""
    if not hasattr(module, name):
        raise StrategyError(f"planted fault: {module.__name__} has no {name!r} any more (the loop changed)")
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _faulty_generate(session: Any, fault: Callable[[], contextlib.AbstractContextManager[Any]]) -> Session:
    """``session`` whose ``generate`` runs inside ``fault()`` (its other methods untouched)."""
    honest = session.generate

    @functools.wraps(honest)
    def generate(request: Any, probe: Any) -> Any:
        with fault():
            return honest(request, probe)

    session.generate = generate
    return session


# -- speculative: acceptance with a tolerance ---------------------------------------------------------


@dataclass
class ToleranceConfig(SpeculativeConfig):
    tolerance: float = field_help(
        "accept a draft token whose target log-probability is within this many nats of the argmax's",
        default=0.5,
    )


def tolerant_accept(honest: Callable[..., Any], tolerance: float) -> Callable[..., Any]:
    """The loop's ``_accept`` with greedy acceptance widened by ``tolerance`` nats (sampling as it was)."""

    def accept(logits: Any, draft: Any, sampler: Any) -> tuple[list[int], int]:
        if not sampler.greedy:
            return honest(logits, draft, sampler)
        tokens = draft.tokens
        logprobs = logits.float().log_softmax(dim=-1)
        best = logprobs.max(dim=-1).values.tolist()
        target = logprobs.argmax(dim=-1).tolist()
        accepted = 0
        while accepted < len(tokens):
            mine = float(logprobs[accepted, tokens[accepted]])
            if tokens[accepted] != target[accepted] and mine < best[accepted] - tolerance:
                break
            accepted += 1
        return [*tokens[:accepted], target[accepted]], accepted

    return accept


class PlantedTolerance(SpeculativeStrategy):
    name = "planted-tolerance"
    description = (
        "PLANTED FAULT: speculative decoding accepting draft tokens within a tolerance of the argmax"
    )
    Config = ToleranceConfig

    def load(self, variant: Variant[Any], device: Device) -> Session:
        from workbench_strategies.speculative import loop

        tolerance = float(variant.config.tolerance)
        return _faulty_generate(
            super().load(variant, device),
            lambda: _replaced(loop, "_accept", tolerant_accept(loop._accept, tolerance)),
        )


# -- speculative: a stale KV entry after a rejection --------------------------------------------------


class PlantedStaleKV(SpeculativeStrategy):
    name = "planted-stale-kv"
    description = "PLANTED FAULT: speculative decoding keeping one rejected draft token's keys/values"

    def load(self, variant: Variant[Any], device: Device) -> Session:
        from workbench_strategies.speculative import loop

        honest = loop.crop_cache

        def crop_one_too_few(cache: Any, length: int) -> None:
            honest(cache, length + 1)  # a no-op when nothing was rejected (the cache is that long)

        # the loop crops only the target's cache through its own name; drafters import the _kv one
        return _faulty_generate(
            super().load(variant, device), lambda: _replaced(loop, "crop_cache", crop_one_too_few)
        )


# -- speculative: an off-by-one position id in the verify pass ----------------------------------------


@dataclass
class PositionConfig(SpeculativeConfig):
    offset: int = field_help(
        "added to the position ids of every verify pass of more than one token", default=1
    )


@contextlib.contextmanager
def _wrapped_forward(model: Any, wrapper: Callable[..., Any]) -> Iterator[None]:
    """``model``'s ``forward`` is ``wrapper(honest_forward, *args, **kwargs)`` inside the block."""
    honest = model.forward
    model.forward = functools.partial(wrapper, honest)
    try:
        yield
    finally:
        del model.forward  # the class's own again


def _shifted_verify(offset: int) -> Callable[..., Any]:
    def forward(honest: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        import torch

        ids = kwargs.get("input_ids")
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        if ids is not None and cache is not None and ids.shape[1] > 1 and kwargs.get("position_ids") is None:
            past = int(cache.get_seq_length())
            if past > 0:  # a verify pass (the prefill starts from an empty cache)
                n = ids.shape[1]
                kwargs["position_ids"] = torch.arange(past + offset, past + offset + n, device=ids.device)[
                    None
                ]
        return honest(*args, **kwargs)

    return forward


class PlantedPosition(SpeculativeStrategy):
    name = "planted-position"
    description = "PLANTED FAULT: speculative decoding whose verify pass has its position ids off by one"
    Config = PositionConfig

    def load(self, variant: Variant[Any], device: Device) -> Session:
        session: Any = super().load(variant, device)
        target = session.hf.model
        offset = int(variant.config.offset)
        return _faulty_generate(session, lambda: _wrapped_forward(target, _shifted_verify(offset)))


# -- prefix cache: a slightly wrong prefix ------------------------------------------------------------


@dataclass
class PrefixFaultConfig(PrefixCacheConfig):
    fault: Literal["short", "scaled"] = field_help(
        "short = the copied keys/values lack the last shared token; scaled = the copied keys times scale",
        default="short",
    )
    scale: float = field_help("fault = scaled: the factor on the copied keys", default=1.01)


class PlantedPrefix(PrefixCacheStrategy):
    name = "planted-prefix"
    description = "PLANTED FAULT: a prefix cache that reuses a slightly wrong prefix"
    Config = PrefixFaultConfig

    def load(self, variant: Variant[Any], device: Device) -> Session:
        session: Any = super().load(variant, device)
        config = variant.config
        honest = session._copy  # the method the session calls, in generate only, to copy a prefix

        def copy(source: Any, length: int) -> Any:
            if config.fault == "short":
                return honest(source, length - 1)  # generate still skips `length` prompt tokens
            cache = honest(source, length)
            for layer in cache.layers:
                layer.keys.mul_(config.scale)
            return cache

        session._copy = copy
        return session


# -- compiled decoding: a nudged logit ----------------------------------------------------------------


@dataclass
class CompiledFaultConfig(BaselineConfig):
    nudge: float = field_help("added to the runner-up's logit at decode step `step` (0: honest)", default=1.0)
    step: int = field_help("the decode step (after the prefill's token) whose logits are nudged", default=2)
    backend: Literal["inductor", "eager"] = field_help(
        "torch.compile's backend (eager: dynamo traces, no code generated; fast for tests)",
        default="inductor",
    )


class PlantedCompiled(BaselineStrategy):
    name = "planted-compiled"
    description = "PLANTED FAULT: compiled decoding whose decode step nudges a logit"
    lossless = True  # the baseline's arithmetic compiled: checked like the other lossless levers
    Config = CompiledFaultConfig

    def load(self, variant: Variant[Any], device: Device) -> Session:
        if variant.compile is None:
            raise StrategyError(f"variant {variant.name!r}: planted-compiled needs compile = true")
        session: Any = super().load(variant, device)
        session.compiled = _nudged_decoder(session.hf, variant.compile, variant.config)
        return session


def _nudged_decoder(hf: Any, mode: str, config: CompiledFaultConfig) -> Any:
    import torch
    from workbench_strategies._compiled import CompiledDecoder

    class NudgedDecoder(CompiledDecoder):
        def __init__(self) -> None:
            super().__init__(hf, mode)
            if config.backend == "eager":
                self.step = torch.compile(hf.model.forward, backend="eager", dynamic=False)
            self.steps = 0

        def generate(self, request: Any, probe: Any) -> Any:
            self.steps = 0
            return super().generate(request, probe)

        def decode(self, token: Any) -> Any:
            logits = super().decode(token)
            self.steps += 1
            if self.steps == config.step and config.nudge:
                logits = logits.clone()
                runner_up = int(logits[0, -1].float().topk(2).indices[1])
                logits[0, -1, runner_up] += config.nudge
            return logits

    return NudgedDecoder()
