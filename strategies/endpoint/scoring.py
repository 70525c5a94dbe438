"""The server's answers to a scoring request (the prompt's log-probabilities, echoed back) read into
:class:`TokenScores`: vLLM's ``prompt_logprobs`` and OpenAI-style echoed ``logprobs``."""

from __future__ import annotations

from typing import Any

from workbench.strategy import StrategyError, TokenScores

__all__ = ["echo_position", "first_choice", "scores", "vllm_position"]


def first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise StrategyError("scoring: the server's answer has no choices")
    return choices[0]


def vllm_position(row: Any, token: int) -> tuple[list[tuple[int, float]], float | None]:
    """One entry of vLLM's ``prompt_logprobs``: ``{"<id>": {"logprob", "rank", "decoded_token"}}``,
    the top-k and the given token (one more entry when it ranks lower)."""
    candidates = [(int(key), float(v["logprob"] if isinstance(v, dict) else v)) for key, v in row.items()]
    given = next((lp for t, lp in candidates if t == token), None)
    return candidates, given


def echo_position(row: Any, token: int) -> tuple[list[tuple[int, float]], float | None]:
    """One position of OpenAI-style echoed logprobs: ``({"token_id:<id>": logprob}, given logprob)``."""
    top, given = row
    candidates = [(int(str(key).removeprefix("token_id:")), float(lp)) for key, lp in (top or {}).items()]
    if given is None:
        given = next((lp for t, lp in candidates if t == token), None)
    return candidates, None if given is None else float(given)


def scores(ids: list[int], start: int, k: int, rows: list[Any], position: Any) -> TokenScores:
    """``rows[i]`` (one per token, ``None`` at 0) to top-k arrays for the positions ``start..``."""
    import numpy as np

    if len(rows) < len(ids):
        raise StrategyError(f"scoring: the server returned {len(rows)} positions for {len(ids)} tokens")
    tops: list[list[tuple[int, float]]] = []
    given: list[float] = []
    for i in range(start, len(ids)):
        if not rows[i]:
            raise StrategyError(f"scoring: the server gave no logprobs at position {i}")
        try:
            candidates, lp = position(rows[i], ids[i])
        except (TypeError, ValueError, KeyError, AttributeError):
            raise StrategyError(f"scoring: the server's logprobs at position {i} are malformed") from None
        if lp is None:
            raise StrategyError(f"scoring: the server gave no logprob for the given token at position {i}")
        tops.append(sorted(candidates, key=lambda c: -c[1])[:k])
        given.append(lp)
    width = min(len(t) for t in tops)  # k, or fewer where the server sent fewer
    return TokenScores(
        top_ids=np.array([[t for t, _ in top[:width]] for top in tops], dtype=np.int64),
        top_logprobs=np.array([[lp for _, lp in top[:width]] for top in tops], dtype=np.float32),
        token_logprobs=np.array(given, dtype=np.float32),
    )
