"""One streamed answer of an OpenAI-compatible server, fed line by line: its text, token ids or
counts, the probe's steps and why it ended; and how the characters each step delivered split the
answer's tokens between the steps."""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from typing import Any

import httpx

from workbench.formatting import duration
from workbench.strategy import FinishReason, Probe, StrategyError

__all__ = ["Stream", "split_counts", "transport_error"]


class Stream:
    """The state of one streamed answer, fed line by line."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.texts: list[str] = []  # all text, in order
        self.step_texts: list[str] = []  # the text each probe step carried (text mode)
        self.ids: list[int] = []
        self.steps = 0
        self.chunks = 0
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.stop_reason: Any = None
        self.done = False
        self.mode: str | None = None  # server-token-ids | server-usage-per-chunk | text
        self._cumulative = 0

    def feed(self, line: str, probe: Probe) -> bool:
        """One line of the event stream; True at ``data: [DONE]``."""
        if not line.startswith("data:"):
            return False  # blank separators, ": keep-alive" comments, "event:" lines
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            raise StrategyError(f"the server sent an invalid event: {data[:120]!r}") from None
        if not isinstance(chunk, dict):
            return False
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StrategyError(f"the server reported an error mid-stream: {message}")
        self.chunks += 1
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        text = ""
        ids: list[int] | None = None
        finished = False
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            text = piece or ""
            if isinstance(choice.get("token_ids"), list):
                ids = [int(i) for i in choice["token_ids"]]
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
                self.stop_reason = choice.get("stop_reason")
                finished = True
        if not (chunk.get("choices") or []):
            return False  # the final usage-only chunk
        self.texts.append(text)
        cumulative = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if ids is not None and (ids or self.mode == "server-token-ids"):
            self.mode = "server-token-ids"
            if ids:
                self.ids.extend(ids)
                self._step(probe, ids)
        elif isinstance(cumulative, int) and self.mode != "text":
            self.mode = "server-usage-per-chunk"
            if cumulative > self._cumulative:
                new, self._cumulative = cumulative - self._cumulative, cumulative
                self._step(probe, n_tokens=new)
        elif text or finished:
            # Text only: a step now (the clock is what matters), its token count after the stream.
            # The finishing chunk gets a step too: it may carry the end-of-sequence token.
            self.mode = "text"
            self.step_texts.append(text)
            self._step(probe, n_tokens=0)
        return False

    def _step(self, probe: Probe, ids: Sequence[int] = (), n_tokens: int | None = None) -> None:
        self.steps += 1
        if n_tokens is None:
            probe.step(ids)
        else:
            probe.step(n_tokens=n_tokens)

    def finish_reason(self) -> FinishReason:
        if self.finish == "length":
            return "length"
        if self.finish == "stop" and self.stop_reason is None:
            return "eos"  # vLLM names the stop string (or token) it stopped on; None is end-of-sequence
        return "stop"

    def transport_error(self, exc: httpx.HTTPError, timeout_s: float) -> str:
        if isinstance(exc, httpx.ReadTimeout):
            if not self.steps:
                return f"no first token from {self.url} within {duration(timeout_s)}"
            return f"the server sent nothing for {duration(timeout_s)} after {self.steps} chunks with tokens (stalled)"
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and self.chunks:
            return f"the server closed the stream mid-answer after {self.chunks} chunks ({exc})"
        return transport_error(exc, self.url, timeout_s)


def transport_error(exc: httpx.HTTPError, url: str, timeout_s: float) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection to {url} within {duration(timeout_s)}"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer from {url} within {duration(timeout_s)}"
    return f"{type(exc).__name__} from {url}: {exc}"


def split_counts(step_chars: Sequence[int], total: int, token_ends: Sequence[int] | None = None) -> list[int]:
    """How many of ``total`` tokens each step held, from the characters each step delivered.

    With ``token_ends`` (the end offset of each token in the whole text, from a tokenizer) a token
    belongs to the step that delivered its last character. Without, tokens are shared in proportion
    to characters, at least one per step that carried text (an estimate: only the per-step split is,
    the total is the server's). Tokens beyond the text (an end-of-sequence token) go to the last step.
    """
    n = len(step_chars)
    if n == 0:
        return []
    counts = [0] * n
    if token_ends is not None:
        bounds = []
        acc = 0
        for c in step_chars:
            acc += c
            bounds.append(acc)
        for end in token_ends:
            counts[min(bisect.bisect_left(bounds, end), n - 1)] += 1
    else:
        chars = sum(step_chars)
        with_text = [i for i, c in enumerate(step_chars) if c > 0]
        if chars and total >= len(with_text):
            for i in with_text:
                counts[i] = 1
            rest = total - len(with_text)
            shares = [rest * c / chars for c in step_chars]
            floors = [int(s) for s in shares]
            counts = [c + f for c, f in zip(counts, floors, strict=True)]
            left = rest - sum(floors)
            by_remainder = sorted(range(n), key=lambda i: shares[i] - floors[i], reverse=True)
            for i in by_remainder[:left]:
                counts[i] += 1
    diff = total - sum(counts)
    if diff > 0:
        counts[-1] += diff
    i = n - 1
    while diff < 0 and i >= 0:
        take = min(counts[i], -diff)
        counts[i] -= take
        diff += take
        i -= 1
    return counts
