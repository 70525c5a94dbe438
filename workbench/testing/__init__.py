"""A deterministic test double that ships with the library: :class:`FakeStrategy`.

It needs no model and no torch. It "prefills" and "decodes" by waiting known amounts of time, so a
test (or a plugin author checking their setup) knows exactly what the runner should measure::

    [[variants]]
    name = "fake"
    strategy = "fake"
    prefill_ms = 40
    decode_ms_per_token = 8

Tokens are deterministic functions of the prompt and the seed; ``tokens_per_step > 1`` imitates a
speculative strategy (several tokens per step, with draft statistics); ``draft_tokens`` with
``acceptance``, ``draft_ms_per_token`` and ``verify_ms_per_token`` imitates a draft -> verify loop
with known costs and sub-splits (for the break-even analysis). ``fail_on_prompt`` and
``crash_after_trials`` make failures on purpose, for testing how they are recorded; ``hold_at`` with
``hold_dir`` holds a worker at a stage until a test releases it (signals without timing races);
``slow_factor`` with ``slow_from``/``slow_until``, or ``drift_per_s``, imitate a machine whose speed
changes during the run, and ``process_factors`` processes of one variant that differ in speed, for
testing the design (interleaving, pairing, fresh workers per repetition).
"""

from __future__ import annotations

import os
import random
import signal
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.strategy import Output, Probe, Prompt, Request, Session, Strategy, field_help

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = ["FakeConfig", "FakeSession", "FakeStrategy", "wait_until_ns"]


@dataclass
class FakeConfig:
    prefill_ms: float = field_help("fixed time before the first token (ms)", default=40.0)
    prefill_ms_per_token: float = field_help("extra prefill time per input token (ms)", default=0.0)
    decode_ms_per_token: float = field_help("time per generated token after the first (ms)", default=8.0)
    tokens_per_step: int = field_help(
        "tokens delivered per decode step (>1 imitates speculative decoding)", default=1
    )
    # A draft -> verify loop with known costs (for the break-even analysis): each step proposes
    # ``draft_tokens`` (fewer where the budget leaves no room), accepts a prefix of them, one token at a
    # time with probability ``acceptance`` (drawn from the prompt and the seed: deterministic), and
    # takes ``draft_ms_per_token`` per proposed token plus a verify of ``decode_ms_per_token +
    # verify_ms_per_token`` per proposed token; every ``plain_every``-th step drafts nothing (k = 0).
    draft_tokens: int = field_help("draft tokens per draft -> verify step (0: no drafting)", default=0)
    acceptance: float = field_help(
        "chance a draft token is accepted, given the ones before were", default=1.0
    )
    draft_ms_per_token: float = field_help("draft time per proposed token (ms)", default=0.0)
    verify_ms_per_token: float = field_help(
        "verify time per proposed token on top of a one-token step (ms)", default=0.0
    )
    plain_every: int = field_help("every n-th decode step drafts nothing (0: never)", default=0)
    output_tokens: int | None = field_help("tokens to generate (default: max_new_tokens)", default=None)
    context_length: int = field_help("the pretend model's context window (tokens)", default=8192)
    weights_mb: float = field_help(
        "the pretend weight footprint (MB), for memory and roofline figures", default=0.0
    )
    fail_on_prompt: str | None = field_help("raise an error on the prompt with this id", default=None)
    crash_after_trials: int | None = field_help("SIGKILL the worker after this many trials", default=None)
    # A machine that drifts, for testing the design (all times are Unix epoch seconds, so every worker
    # of a run sees the same window): costs times ``slow_factor`` between ``slow_from`` and
    # ``slow_until``, and growing by ``drift_per_s`` per second after ``drift_from``.
    slow_factor: float = field_help("cost multiplier inside the slow window", default=1.0)
    slow_from: float | None = field_help("start of the slow window (Unix time, s)", default=None)
    slow_until: float | None = field_help("end of the slow window (Unix time, s)", default=None)
    drift_per_s: float = field_help("cost growth per second after drift_from (0.01 = +1 %/s)", default=0.0)
    drift_from: float | None = field_help("when the drift starts (Unix time, s)", default=None)
    # Two processes of one variant that run at different speeds (a process's memory placement, its
    # thread pool's state): the worker process numbered k (``WORKBENCH_WORKER``, 0 = the variant's
    # first) has its costs times ``process_factors[k % len]``.
    process_factors: tuple[float, ...] = field_help(
        "cost multiplier of the variant's k-th worker process (cycled)", default=(1.0,)
    )
    # A stage a test can hit without racing the clock (tests/test_signals.py): the variant's worker
    # process k holds at ``hold_at`` -- ``"k:load"`` (in the load) or ``"k:trialN"`` (after the first
    # token of its N-th trial, warm-ups counted) -- until the file ``release`` appears in ``hold_dir``.
    # It writes ``reached`` there when it holds, and every worker writes ``worker-<pid>`` (its variant
    # and number) when it loads, so a test knows which process to signal.
    hold_at: str | None = field_help(
        "for tests: hold this worker stage, 'k:load' or 'k:trialN', until hold_dir/release exists",
        default=None,
    )
    hold_dir: str | None = field_help("for tests: the folder of hold_at's files", default=None)

    def __post_init__(self) -> None:
        if self.tokens_per_step < 1:
            raise ValueError("tokens_per_step must be at least 1")
        if min(self.prefill_ms, self.prefill_ms_per_token, self.decode_ms_per_token) < 0:
            raise ValueError("costs must not be negative")
        if self.slow_factor <= 0:
            raise ValueError("slow_factor must be positive")
        self.process_factors = tuple(self.process_factors)
        if not self.process_factors or min(self.process_factors) <= 0:
            raise ValueError("process_factors must be positive multipliers")
        if self.draft_tokens < 0 or self.plain_every < 0:
            raise ValueError("draft_tokens and plain_every must not be negative")
        if self.draft_tokens and self.tokens_per_step > 1:
            raise ValueError("draft_tokens and tokens_per_step > 1 both imitate speculation: choose one")
        if not 0 <= self.acceptance <= 1:
            raise ValueError("acceptance must be between 0 and 1")
        if min(self.draft_ms_per_token, self.verify_ms_per_token) < 0:
            raise ValueError("costs must not be negative")

    def factor(self, now: float) -> float:
        """The cost multiplier at Unix time ``now``."""
        index = int(os.environ.get("WORKBENCH_WORKER", "0") or 0)
        f = self.process_factors[index % len(self.process_factors)]
        if self.slow_from is not None and self.slow_from <= now < (self.slow_until or float("inf")):
            f *= self.slow_factor
        if self.drift_per_s and self.drift_from is not None and now > self.drift_from:
            f *= 1 + self.drift_per_s * (now - self.drift_from)
        return f


#: how long a held stage waits for its release at most (a test that died must not leave it forever)
HOLD_LIMIT_S = 300.0


def hold(folder: str, stage: str) -> None:
    """Tell a test that this process reached ``stage`` (the file ``reached`` in ``folder``: this pid
    and the stage), then wait until the test writes ``release`` there. Signals arrive meanwhile as
    they would in the middle of the stage."""
    here = os.path.join(folder, f"reached.{os.getpid()}")
    with open(here, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n{stage}\n")
    os.replace(here, os.path.join(folder, "reached"))  # whole, or not there
    release = os.path.join(folder, "release")
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)


def wait_until_ns(deadline_ns: int) -> None:
    """Sleep, then spin for the last stretch: accurate to a few microseconds."""
    while True:
        remaining = deadline_ns - time.perf_counter_ns()
        if remaining <= 0:
            return
        if remaining > 2_000_000:
            time.sleep((remaining - 1_000_000) / 1e9)


class FakeSession(Session):
    VOCAB = 32_000

    def __init__(self, config: FakeConfig) -> None:
        self.config = config
        self.context_length = config.context_length
        self.weights_mb = config.weights_mb
        self.dtype = "none"
        self._trials = 0
        self.worker = os.environ.get("WORKBENCH_WORKER", "0") or "0"  # this process's number

    def _stage(self, stage: str) -> None:
        """Hold here when the config's ``hold_at`` names this stage of this worker process."""
        c = self.config
        if c.hold_dir is not None and c.hold_at == f"{self.worker}:{stage}":
            hold(c.hold_dir, f"{self.worker}:{stage}")

    def encode(self, prompt: Prompt) -> list[int]:
        text = (
            prompt.prompt
            if prompt.prompt is not None
            else "\n".join(m["content"] for m in prompt.messages or ())
        )
        return [zlib.crc32(word.encode()) % self.VOCAB for word in text.split()]

    def decode(self, token_ids: list[int]) -> str:  # type: ignore[override]
        return " ".join(f"w{i}" for i in token_ids)

    def generate(self, request: Request, probe: Probe) -> Output:
        c = self.config
        self._trials += 1
        if c.crash_after_trials is not None and self._trials > c.crash_after_trials:
            os.kill(os.getpid(), signal.SIGKILL)
        if c.fail_on_prompt is not None and request.prompt.id == c.fail_on_prompt:
            raise RuntimeError(f"fake failure on prompt {request.prompt.id!r}")
        start = time.perf_counter_ns()
        n_out = min(c.output_tokens or request.max_new_tokens, request.max_new_tokens)
        base = zlib.crc32(bytes(str((request.input_ids[:8], request.seed)), "utf-8"))
        tokens = [(base + 7919 * i) % self.VOCAB for i in range(n_out)]
        prefill = c.prefill_ms + c.prefill_ms_per_token * len(request.input_ids)
        deadline = start + int(prefill * c.factor(time.time()) * 1e6)
        wait_until_ns(deadline)
        probe.step(tokens[:1])
        self._stage(f"trial{self._trials}")  # in the middle of the trial: its first token is out
        if c.draft_tokens:
            self._draft_verify(tokens, deadline, random.Random(base), probe)
            return Output(token_ids=tokens, text=self.decode(tokens), finish_reason="length")
        i = 1
        while i < n_out:
            chunk = tokens[i : i + c.tokens_per_step]
            deadline += int(c.decode_ms_per_token * len(chunk) * c.factor(time.time()) * 1e6)
            wait_until_ns(deadline)
            proposed = c.tokens_per_step - 1
            probe.step(chunk, draft_proposed=proposed, draft_accepted=min(proposed, len(chunk) - 1))
            i += len(chunk)
        return Output(token_ids=tokens, text=self.decode(tokens), finish_reason="length")

    def _draft_verify(self, tokens: list[int], deadline: int, rng: random.Random, probe: Probe) -> None:
        """The decode steps of a draft -> verify loop with the configured costs and acceptance."""
        c = self.config
        i, step = 1, 0
        while i < len(tokens):
            step += 1
            room = len(tokens) - i - 1  # as the real loop: never draft past the budget
            k = 0 if c.plain_every and step % c.plain_every == 0 else min(c.draft_tokens, room)
            accepted = 0
            while accepted < k and rng.random() < c.acceptance:
                accepted += 1
            draft_ms = c.draft_ms_per_token * k if k else None
            verify_ms = c.decode_ms_per_token + c.verify_ms_per_token * k
            deadline += int(((draft_ms or 0.0) + verify_ms) * c.factor(time.time()) * 1e6)
            wait_until_ns(deadline)
            chunk = tokens[i : i + accepted + 1]
            probe.step(
                chunk, draft_proposed=k, draft_accepted=accepted, draft_ms=draft_ms, verify_ms=verify_ms
            )
            i += len(chunk)

    def generate_batch(self, requests: Sequence[Request], probes: Sequence[Probe]) -> list[Output]:
        """Ideal batching: one prefill costing the longest prompt's, then one token per request per
        step at the cost of one (``tokens_per_step`` is ignored)."""
        c = self.config
        self._trials += len(requests)
        start = time.perf_counter_ns()
        plans = []
        for request in requests:
            n_out = min(c.output_tokens or request.max_new_tokens, request.max_new_tokens)
            base = zlib.crc32(bytes(str((request.input_ids[:8], request.seed)), "utf-8"))
            plans.append([(base + 7919 * i) % self.VOCAB for i in range(n_out)])
        longest = max(len(r.input_ids) for r in requests)
        deadline = start + int((c.prefill_ms + c.prefill_ms_per_token * longest) * 1e6)
        for i in range(max(len(p) for p in plans)):
            if i:
                deadline += int(c.decode_ms_per_token * 1e6)
            wait_until_ns(deadline)
            for tokens, probe in zip(plans, probes, strict=True):
                if i < len(tokens):
                    probe.step(tokens[i : i + 1])
        return [Output(token_ids=t, text=self.decode(t), finish_reason="length") for t in plans]


class FakeStrategy(Strategy[FakeConfig]):
    name = "fake"
    description = "Deterministic test double with known prefill and per-token costs (no model, no torch)"
    Config = FakeConfig
    requires_model = False
    supports_batching = True

    def load(self, variant: Variant[FakeConfig], device: Device) -> Session:
        session = FakeSession(variant.config)
        folder = variant.config.hold_dir
        if folder is not None:  # which process this is, for a test that signals it
            with open(os.path.join(folder, f"worker-{os.getpid()}"), "w", encoding="utf-8") as f:
                f.write(f"{variant.name}:{session.worker}\n")
            session._stage("load")
        return session
