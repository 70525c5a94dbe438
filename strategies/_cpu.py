"""CPU kernel choices for transformers models (imported inside ``Strategy.load``).

Three things the stock path leaves on the table on a CPU without native bf16/fp16 arithmetic (the
measurements, and the command that took them, are in docs/strategies.md, "On a CPU"). All three
change how a result is computed, not what: every model loaded on a CPU gets the first two (the
baseline too, so comparisons stay like for like); a draft model also gets the third.

* **Masked grouped-query attention.** With a mask (a verify pass of ``k + 1`` tokens after a cached
  prompt, a padded batch) transformers' ``sdpa`` repeats every key/value head to the query heads
  (``repeat_kv``: a copy of the whole cache per layer per call) because CUDA's fast kernels cannot
  take a mask with ``enable_gqa``. PyTorch's CPU kernels can: :func:`workbench_sdpa` passes
  ``enable_gqa=True`` with the mask. Same logits bit for bit, a cheaper verify step. Without a mask
  it calls transformers' own ``sdpa`` unchanged.
* **The output layer for a few rows.** ``linear(x, W)`` with a few rows of ``x`` against the large
  output matrix takes MKL's small-M sgemm path, which reads ``W`` far slower than the one-row path,
  so a verify pass paid several times over for its logits. :func:`use_few_row_head` computes
  ``(W @ x.T).T`` for 2-32 rows (the same sums, a kernel that streams ``W`` once). One row (every
  plain decode step) keeps ``linear``.
* **Half-precision attention is slow on such CPUs.** A bf16 copy of the model runs its matmuls faster
  than fp32 (half the bytes) but its attention slower, so at long contexts a bf16 draft step loses
  much of what the half-size weights gained. :class:`GrowingCache` stores keys/values in float32
  and :func:`workbench_sdpa` computes attention in the cache's dtype (query cast up, output cast back).
  It also grows in place (amortised doubling) instead of concatenating the whole cache on every
  token, and crops by moving its end.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

__all__ = ["GrowingCache", "use_cpu_kernels", "use_few_row_head", "use_workbench_attention", "workbench_sdpa"]

NAME = "workbench_sdpa"


def workbench_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa`` attention, computed in the cache's dtype, with masked GQA on CPU."""
    dtype = query.dtype
    if key.dtype != dtype:  # a half-precision model over a float32 cache
        query = query.to(key.dtype)
    groups = getattr(module, "num_key_value_groups", 1)
    if (
        attention_mask is None
        or groups == 1
        or query.device.type != "cpu"
        or kwargs.get("position_bias") is not None
        or kwargs.get("softcap") is not None
    ):
        out, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
        return out.to(dtype), None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous().to(dtype), None


AttentionInterface.register(NAME, workbench_sdpa)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # the same masks as sdpa


def use_workbench_attention(model: Any) -> bool:
    """Switch a model that uses ``sdpa`` attention to :func:`workbench_sdpa`; ``True`` if it uses it now."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current != "sdpa":
        return current == NAME
    try:
        model.set_attn_implementation(NAME)
    except (AttributeError, ValueError, TypeError):  # models that cannot switch keep stock sdpa
        return False
    return True


def _few_row_linear(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    if not 1 < rows <= 32 or self.weight.dtype != x.dtype:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    out = torch.mm(self.weight, x.reshape(rows, x.shape[-1]).T).T.reshape(*x.shape[:-1], -1)
    return out if self.bias is None else out + self.bias


def use_few_row_head(model: Any) -> bool:
    """Compute the output layer of ``model`` as ``(W @ x.T).T`` for 2-32 rows; ``True`` if it does."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if get else None
    if type(head) is not torch.nn.Linear:  # quantized or custom heads keep their own forward
        return False
    head.forward = _few_row_linear.__get__(head)  # type: ignore[method-assign]  # per-instance override
    return True


def use_cpu_kernels(model: Any) -> None:
    """What every model loaded on a CPU gets: :func:`workbench_sdpa` and :func:`use_few_row_head`."""
    use_workbench_attention(model)
    use_few_row_head(model)


class GrowingLayer(DynamicLayer):
    """A :class:`DynamicLayer` over a preallocated buffer: appends write in place (the buffer doubles
    when full), crops move the end; ``keys``/``values`` are views of the filled part. ``dtype`` (when
    given) is the storage dtype, whatever the model's."""

    def __init__(self, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.store_dtype = dtype
        self.length = 0
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True
        dtype = self.store_dtype or key_states.dtype
        self._keys = key_states.new_empty((*key_states.shape[:2], 0, key_states.shape[-1]), dtype=dtype)
        self._values = value_states.new_empty(
            (*value_states.shape[:2], 0, value_states.shape[-1]), dtype=dtype
        )
        self._view()

    def _view(self) -> None:
        assert self._keys is not None and self._values is not None
        self.keys = self._keys[..., : self.length, :]
        self.values = self._values[..., : self.length, :]

    def _grow(self, needed: int) -> None:
        assert self._keys is not None and self._values is not None
        capacity = max(needed, 2 * self._keys.shape[-2], 64)
        keys = self._keys.new_empty((*self._keys.shape[:2], capacity, self._keys.shape[-1]))
        values = self._values.new_empty((*self._values.shape[:2], capacity, self._values.shape[-1]))
        keys[..., : self.length, :] = self._keys[..., : self.length, :]
        values[..., : self.length, :] = self._values[..., : self.length, :]
        self._keys, self._values = keys, values

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self._keys is not None and self._values is not None
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self._grow(end)
        self._keys[..., self.length : end, :] = key_states
        self._values[..., self.length : end, :] = value_states
        self.length = end
        self._view()
        return self.keys, self.values  # type: ignore[return-value]  # set by _view()

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes the negative number of positions to remove, got {tokens_to_remove}")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self.length = max(0, self.length + tokens_to_remove)
        self._view()

    def reset(self) -> None:
        self.length = 0
        if self.is_initialized:
            self._view()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._keys is not None and self._values is not None:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._view()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._keys is not None and self._values is not None:
            self._keys, self._values = self._keys[indices, ...], self._values[indices, ...]
            self._view()


class GrowingCache(DynamicCache):
    """A :class:`DynamicCache` of :class:`GrowingLayer` (full attention layers only), storing in
    ``dtype`` when given."""

    def __init__(self, config: Any, dtype: torch.dtype | None = None) -> None:
        super().__init__(config=config)
        if not self.layers or any(type(layer) is not DynamicLayer for layer in self.layers):
            raise ValueError("GrowingCache supports full-attention layers only (no sliding windows)")
        self.layers = [GrowingLayer(dtype) for _ in self.layers]
