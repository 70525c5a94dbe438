"""A test double whose quality-pass scores are known by hand (tests/test_quality.py): the fake's
generation over a vocabulary of 64 tokens, and a ``score`` whose distribution at every scored position
is two logits above a flat floor — ``peak`` on the given token and ``rival`` on the token after it
(mod 64) — so a test can compute the KLD, Δp, same-top and NLL of two such variants itself. ``shift``
moves every encoded token id (another tokenizer: the prompts encode differently). Imported by the
worker as ``tests.quality_helpers``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.strategy import Device, Prompt, Session, TokenScores, Variant, field_help
from workbench.testing import FakeConfig, FakeSession, FakeStrategy

VOCAB = 64


@dataclass
class KnownScoresConfig(FakeConfig):
    peak: float = field_help("the given token's logit (the others: 0)", default=4.0)
    rival: float = field_help("the logit of the token after the given one (mod the vocabulary)", default=0.0)
    shift: int = field_help("added to every encoded token id (mod the vocabulary)", default=0)


def known_logits(token: int, peak: float, rival: float) -> np.ndarray:
    """The logits a :class:`KnownScoresSession` scores ``token`` with."""
    row = np.zeros(VOCAB)
    row[token] = peak
    row[(token + 1) % VOCAB] += rival
    return row


class KnownScoresSession(FakeSession):
    VOCAB = VOCAB

    def encode(self, prompt: Prompt) -> list[int]:
        return [(t + self.config.shift) % VOCAB for t in super().encode(prompt)]

    def score(self, token_ids: Sequence[int], start: int) -> TokenScores:
        c = self.config
        return TokenScores.from_logits([known_logits(int(t), c.peak, c.rival) for t in token_ids[start:]])


class KnownScoresStrategy(FakeStrategy):
    name = "known-scores"
    Config = KnownScoresConfig

    def load(self, variant: Variant[Any], device: Device) -> Session:
        return KnownScoresSession(variant.config)
