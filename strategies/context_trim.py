"""``context-trim``: send less context. The prompt is cut to a token budget before the prefill.

The cheapest prefill lever needs no second model: drop what the answer probably does not need. Two
policies:

- ``oldest-turns`` (chat prompts): drop the oldest user/assistant turns after the system message until
  the templated conversation fits the budget; the last user message always stays. If even that is too
  long, the remaining tokens are cut in the middle.
- ``middle`` (any prompt): keep the first ``head_fraction`` of the budget from the start of the prompt
  (instructions, the system prompt, the chat template's header) and the rest from its end (the
  question and the generation prompt); drop the middle of a long document.
- ``auto``: ``oldest-turns`` for chat prompts, ``middle`` otherwise.

Prompts within the budget are untouched (output identical to the baseline). The trial records
``trimmed_tokens``; the quality side is measured against the baseline variant like every lossy lever
(``matches_baseline``, ``first_divergence``, ``match_fraction``), and the quality pass scores the
baseline's answer under the trimmed prompt (:meth:`ContextTrimSession.sent_prompt`: KLD, same-top,
Δp per answer token), so the table shows what the speed-up cost. Then decoding is exactly the
baseline's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from workbench.strategy import Output, Probe, Prompt, Request, Session, Strategy, field_help

from .hf_session import HFSession, decode_loop, torch_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant


@dataclass
class ContextTrimConfig:
    max_input_tokens: int = field_help("token budget for the prompt; longer prompts are trimmed", default=512)
    policy: Literal["auto", "oldest-turns", "middle"] = field_help(
        "oldest-turns = drop the oldest chat turns; middle = drop the middle of the prompt; "
        "auto = oldest-turns for chat prompts, middle otherwise",
        default="auto",
    )
    head_fraction: float = field_help(
        "middle policy: share of the budget kept from the start of the prompt (the rest from its end)",
        default=0.25,
    )

    def __post_init__(self) -> None:
        if self.max_input_tokens < 8:
            raise ValueError(f"max_input_tokens must be at least 8, got {self.max_input_tokens}")
        if not 0.0 <= self.head_fraction <= 1.0:
            raise ValueError(f"head_fraction must be between 0 and 1, got {self.head_fraction}")


def trim_middle(ids: list[int], budget: int, head_fraction: float) -> list[int]:
    """Keep ``budget`` tokens: the first ``head_fraction`` of them from the start, the rest from the end."""
    if len(ids) <= budget:
        return list(ids)
    head = int(budget * head_fraction)
    tail = budget - head
    return list(ids[:head]) + (list(ids[-tail:]) if tail else [])


def drop_oldest_turns(
    messages: tuple[dict[str, str], ...], encode: Any, budget: int
) -> tuple[tuple[dict[str, str], ...], list[int]]:
    """Drop the oldest turns after the system message(s) until the encoded conversation fits.

    Turns go in whole user/assistant pairs where possible (an assistant reply without its question
    misleads the model); the last user message always stays. Returns the messages kept and their ids."""
    system = tuple(m for m in messages[:1] if m.get("role") == "system")
    rest = list(messages[len(system) :])
    ids = encode(system + tuple(rest))
    while len(ids) > budget and len(rest) > 1:
        drop = 1
        if rest[0].get("role") == "user" and len(rest) > 2 and rest[1].get("role") == "assistant":
            drop = 2
        del rest[:drop]
        ids = encode(system + tuple(rest))
    return system + tuple(rest), ids


class ContextTrimSession(HFSession):
    def __init__(self, hf: Any, config: ContextTrimConfig) -> None:
        super().__init__(hf)
        self.config = config

    def trim(self, request: Request) -> list[int]:
        """The prompt's ids as sent to the model: within the budget, by the configured policy."""
        c = self.config
        ids = list(request.input_ids)
        if len(ids) <= c.max_input_tokens:
            return ids
        prompt = request.prompt
        policy = c.policy
        if policy == "auto":
            policy = "oldest-turns" if prompt.messages else "middle"
        if policy == "oldest-turns" and prompt.messages and prompt.input_tokens is None:

            def encode(messages: tuple[dict[str, str], ...]) -> list[int]:
                return self.hf.encode(Prompt(id=prompt.id, messages=messages))

            _, ids = drop_oldest_turns(prompt.messages, encode, c.max_input_tokens)
        return trim_middle(ids, c.max_input_tokens, c.head_fraction)

    def sent_prompt(self, request: Request) -> list[int]:
        """The trimmed prompt: the quality pass scores the baseline's answer under it."""
        return self.trim(request)

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch
        from transformers import DynamicCache

        from ._hf import kv_cache
        from ._kv import held

        hf = self.hf
        with torch.inference_mode():
            ids = self.trim(request)  # inside the timed TTFT: trimming is part of the lever's cost
            cache = DynamicCache(config=hf.model.config)
            input_ids = torch.tensor([ids], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
        kv_tokens, kv_bytes = held(cache)
        return Output(
            token_ids=tokens,
            text=hf.decode(tokens),
            finish_reason=reason,  # type: ignore[arg-type]
            trimmed_tokens=len(request.input_ids) - len(ids),
            kv_held_tokens=kv_tokens,
            kv_held_bytes=kv_bytes,
        )


class ContextTrimStrategy(Strategy[ContextTrimConfig]):
    compile_refusal = "its trimmed prompt is decoded eagerly (the compiled path serves the baseline's loop)"
    name = "context-trim"
    lever = "context trimming"
    phase = "prefill"
    description = "Less context: drop the oldest chat turns or the middle of a long prompt to a token budget"
    Config = ContextTrimConfig

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[ContextTrimConfig], device: Device) -> Session:
        from ._hf import load_hf_model

        return ContextTrimSession(load_hf_model(variant, device), variant.config)
