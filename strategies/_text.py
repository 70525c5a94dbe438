"""The text side shared by every local strategy, the transformers ones and the runtimes with kernels
of their own (llama.cpp, ONNX Runtime GenAI): prompts through a transformers tokenizer (the chat
template for ``messages``) and when generation ends (EOS unless ``ignore_eos``, a stop string, the
token budget). No torch here: a runtime that does not need torch does not import it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from workbench.strategy import Prompt, Request, StrategyError

__all__ = ["TOKENIZER_PROBE", "Stopper", "encode_prompt"]

#: Encoded by two tokenizers to tell whether they agree (a draft's and its target's): words, digits,
#: punctuation, whitespace runs, non-ASCII.
TOKENIZER_PROBE = "The quick brown fox, 1234 jumps over\n\tthe lazy dog. Ünïcödé — 漢字 🙂 def f(x): return x"


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: raw text with the tokenizer's special tokens, or chat ``messages``
    through its chat template (with the generation prompt)."""
    if prompt.messages is not None:
        if not getattr(tokenizer, "chat_template", None):
            raise StrategyError(
                f"prompt {prompt.id!r} is a chat (messages) but this model's tokenizer has no chat template; "
                'use plain {"prompt": ...} lines for base models'
            )
        text = tokenizer.apply_chat_template(
            list(prompt.messages), add_generation_prompt=True, tokenize=False
        )
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt.prompt or "")["input_ids"])


class Stopper:
    """Decides when generation ends: EOS (unless ``ignore_eos``), a stop string, or the budget."""

    def __init__(
        self, request: Request, eos_ids: frozenset[int], decode: Callable[[Sequence[int]], str]
    ) -> None:
        self.eos_ids = frozenset() if request.ignore_eos else eos_ids
        self.stop = request.stop
        self.max_new_tokens = request.max_new_tokens
        self._decode = decode
        # a stop string can only be completed by the last few tokens: decode a short tail
        self._tail = max((len(s) for s in self.stop), default=0) + 8

    def __call__(self, tokens: Sequence[int], new: int = 1) -> str | None:
        for t in tokens[-new:]:
            if t in self.eos_ids:
                return "eos"
        if self.stop and any(s in self._decode(tokens[-self._tail :]) for s in self.stop):
            return "stop"
        if len(tokens) >= self.max_new_tokens:
            return "length"
        return None
