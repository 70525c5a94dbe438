"""``hf-assisted``: transformers' own assisted generation, as a reference to cross-check our loop.

``model.generate(assistant_model=draft)`` with a draft model, or ``prompt_lookup_num_tokens`` without
one. Tokens reach the runner's probe through a streamer, so it is timed exactly like every other
strategy. What transformers does not expose, and why ``speculative``/``prompt-lookup`` have their own
loop: no per-step acceptance statistics (``draft_proposed``/``draft_accepted`` stay 0 here), the draft
length is read from the draft's ``generation_config`` (a ``num_assistant_tokens`` passed to
``generate()`` is ignored, transformers issue #40739 — we set it on the draft's config), drafting stops
early below a confidence threshold (default 0.4 in transformers; a parameter here), batch size 1 only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.core.shapes import kv_bytes_per_token
from workbench.strategy import (
    Dtype,
    Output,
    Probe,
    Request,
    ScoreShape,
    Session,
    Strategy,
    StrategyError,
    field_help,
    model_field,
)

from .hf_session import HFSession, torch_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant


@dataclass
class HFAssistedConfig:
    draft: str = model_field(
        "draft model source; empty = transformers' prompt lookup (prompt_lookup_num_tokens)", default=""
    )
    draft_dtype: Dtype = field_help(  # noqa: RUF009 (a variant's dtype choices: workbench.strategy.Dtype)
        "dtype of the draft model; auto = the target's", default="auto"
    )
    num_draft_tokens: int = field_help(
        "draft tokens per step (set on the draft's generation_config)", default=5
    )
    confidence_threshold: float = field_help(
        "stop drafting when the draft's confidence falls below this (transformers' default 0.4; 0 = never)",
        default=0.4,
    )
    prompt_lookup_num_tokens: int = field_help("draft tokens per step without a draft model", default=10)
    max_ngram_size: int = field_help("longest n-gram matched without a draft model", default=2)

    def __post_init__(self) -> None:
        if self.num_draft_tokens < 1 or self.prompt_lookup_num_tokens < 1:
            raise ValueError("num_draft_tokens and prompt_lookup_num_tokens must be at least 1")


class _ProbeStreamer:
    """transformers' streamer protocol: ``put`` gets the prompt first, then each step's new tokens."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.prompt_seen = False
        self.tokens: list[int] = []

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        ids = [int(t) for t in value.reshape(-1).tolist()]
        self.tokens.extend(ids)
        self.probe.step(ids)

    def end(self) -> None:
        pass


class HFAssistedSession(HFSession):
    def __init__(self, hf: Any, draft_hf: Any | None, config: HFAssistedConfig) -> None:
        super().__init__(hf)
        self.draft_hf = draft_hf
        self.config = config
        if draft_hf is not None:
            self.weights_mb = hf.weights_mb + draft_hf.weights_mb
            self.kv_bytes_per_token = (self.kv_bytes_per_token or 0) + (
                kv_bytes_per_token(draft_hf.model_shape) or 0
            ) or None
            gc = draft_hf.model.generation_config
            gc.num_assistant_tokens = config.num_draft_tokens
            gc.num_assistant_tokens_schedule = "constant"
            gc.assistant_confidence_threshold = config.confidence_threshold

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch

        hf = self.hf
        ids = torch.tensor([request.input_ids], dtype=torch.long, device=hf.torch_device)
        kwargs: dict[str, Any] = {
            "attention_mask": torch.ones_like(ids),
            "max_new_tokens": request.max_new_tokens,
            "do_sample": request.temperature > 0,
            "pad_token_id": hf.tokenizer.pad_token_id or next(iter(hf.eos_ids), None),
        }
        if request.temperature > 0:
            kwargs.update(temperature=request.temperature, top_p=request.top_p, top_k=request.top_k or None)
            torch.manual_seed(request.seed)
        if request.ignore_eos:
            kwargs["min_new_tokens"] = request.max_new_tokens
        if request.stop:
            kwargs.update(stop_strings=list(request.stop), tokenizer=hf.tokenizer)
        if self.draft_hf is not None:
            kwargs["assistant_model"] = self.draft_hf.model
        else:
            kwargs.update(
                prompt_lookup_num_tokens=self.config.prompt_lookup_num_tokens,
                max_matching_ngram_size=self.config.max_ngram_size,
            )
        streamer = _ProbeStreamer(probe)
        with torch.inference_mode():
            out = hf.model.generate(ids, streamer=streamer, **kwargs)
        tokens = out[0, ids.shape[1] :].tolist()
        if tokens != streamer.tokens:
            raise StrategyError("transformers' generate returned other tokens than it streamed")
        reason = "length" if len(tokens) >= request.max_new_tokens else "eos"
        if tokens and tokens[-1] not in hf.eos_ids and len(tokens) < request.max_new_tokens:
            reason = "stop"
        return Output(token_ids=tokens, text=hf.decode(tokens), finish_reason=reason)  # type: ignore[arg-type]


class HFAssistedStrategy(Strategy[HFAssistedConfig]):
    name = "hf-assisted"
    lever = "assisted generation"
    phase = "decode"
    description = "transformers' own assisted generation (draft model or prompt lookup), for cross-checks"
    lossless = True  # greedy output = its model's own, up to the rounding of its shapes (quality pass)
    Config = HFAssistedConfig

    compile_refusal = "transformers' assisted generation refuses a compiled forward"

    def score_shape(self, variant: Variant[HFAssistedConfig]) -> ScoreShape:
        """Verify passes of the draft length + 1 tokens (every draft accepted)."""
        return ScoreShape(chunk=variant.config.num_draft_tokens + 1)

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[HFAssistedConfig], device: Device) -> Session:
        from ._hf import load_hf_model
        from .speculative.draft_model import check_compatible

        config = variant.config
        target = load_hf_model(variant, device)
        draft = None
        if config.draft:
            dtype = (
                config.draft_dtype
                if config.draft_dtype != "auto"
                else str(target.dtype).removeprefix("torch.")
            )
            draft = load_hf_model(dataclasses.replace(variant, model=config.draft, dtype=dtype), device)
            check_compatible(target, draft, config.draft)
        return HFAssistedSession(target, draft, config)
