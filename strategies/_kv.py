"""KV caches that can be cut back and copied on every model family (imported inside ``Strategy.load``:
it imports torch and transformers at module level).

Full-attention layers keep every position's keys/values, so cutting a cache back (the speculative
loop's rollback after a rejected draft) or copying the first ``n`` positions of one (the prefix cache)
is a slice. A *sliding-window* layer (Gemma 2/3, Mistral with a window, GPT-OSS) keeps only the last
``window - 1`` positions: transformers' ``DynamicSlidingWindowLayer`` drops the older ones on every
update and refuses ``crop`` once the window is full ("the current layer does not track past states").
Two cases:

* **Rollback** (:func:`new_cache` with ``rollback=True``): the layers *record* their past
  (``activate_past_recording``): an update keeps everything until the next :func:`crop_cache`, which
  removes the rejected positions and only then restricts the layer to its window. A verify pass adds
  ``k + 1`` positions, so the layer holds at most ``window + k`` of them between two crops.
* **Prefix reuse** (:func:`copy_prefix`, :func:`cut_to`): a cache whose layers record their past and
  are never cropped keeps every position, like a full-attention layer; the prefix cache stores such
  caches, so any shared prefix can be copied out of one (the sliding layer of the copy then holds
  the ``n`` positions and says it has seen ``n``). What a layer does not hold cannot be reused:
  :func:`reusable_length` says how much of a cache can be, and :func:`unsupported_layers` names the
  layer kinds that keep a recurrent state instead of positions (linear attention, state-space layers:
  a state cannot be cut back to an earlier position), which the prefix cache refuses in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from workbench.strategy import Output

__all__ = [
    "copy_prefix",
    "crop_cache",
    "cut_to",
    "follow_lengths",
    "held",
    "new_cache",
    "reusable_length",
    "unsupported_layers",
]


def new_cache(model: Any, *, rollback: bool = False) -> Any:
    """A ``DynamicCache`` for ``model``; ``rollback``: its sliding-window layers record their past, so
    :func:`crop_cache` can cut it back (a plain decode never needs it)."""
    cache = DynamicCache(config=model.config)
    if rollback and any(_sliding(layer) for layer in cache.layers):
        cache.activate_past_recording()
    return cache


def _sliding(layer: Any) -> bool:
    return isinstance(layer, DynamicSlidingWindowLayer)


def _held_from(layer: Any) -> int:
    """The absolute position of the first key ``layer`` holds (0 for a layer that holds them all)."""
    if not getattr(layer, "is_initialized", False) or layer.keys is None or layer.keys.numel() == 0:
        return 0
    return int(layer.get_seq_length()) - int(layer.keys.shape[-2])


def crop_cache(cache: Any, length: int) -> None:
    """Cut ``cache`` back to its first ``length`` positions (transformers 5 ``crop`` takes the negative
    number of positions to remove). A layer that records its past is also restricted to its window
    again, so a rollback cache does not grow beyond ``window + k``."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)
    elif extra == 0 and any(getattr(layer, "record_past", False) for layer in cache.layers):
        cache.crop(0)


def unsupported_layers(model: Any) -> list[str]:
    """The names of ``model``'s cache layer kinds whose state cannot be cut back to an earlier
    position (none for full-attention and sliding-window layers)."""
    cache = DynamicCache(config=model.config)
    return sorted({type(layer).__name__ for layer in cache.layers if not isinstance(layer, DynamicLayer)})


def reusable_length(cache: Any, length: int) -> int:
    """How many of the first ``length`` positions of ``cache`` can be copied into a new cache: all of
    them when every layer holds what the new cache needs (a sliding layer, the ``window - 1`` positions
    before ``length``), else 0 (the positions a layer needs were dropped)."""
    for layer in cache.layers:
        first = _held_from(layer)
        if first == 0:
            continue
        need = max(0, length - layer.sliding_window + 1) if _sliding(layer) else 0
        if first > need:
            return 0
    return length


def copy_prefix(model: Any, source: Any, length: int) -> Any:
    """A new cache holding copies of the first ``length`` positions of ``source`` (copied: the new one
    is decoded into, and ``source`` must stay intact), recording its past so that it keeps every
    position (:mod:`module docs <._kv>`). ``length`` must be :func:`reusable_length`'s."""
    cache = new_cache(model, rollback=True)
    for idx, (src, dst) in enumerate(zip(source.layers, cache.layers, strict=True)):
        first = _held_from(src)
        start = max(0, length - dst.sliding_window + 1) if _sliding(dst) and first > 0 else 0
        keys = src.keys[:, :, start - first : length - first].clone()
        values = src.values[:, :, start - first : length - first].clone()
        cache.update(keys, values, idx)
        if _sliding(dst):
            dst.cumulative_length = length
    return cache


def cut_to(cache: Any, length: int) -> None:
    """Cut ``cache`` back to its first ``length`` positions, keeping every position a layer holds up to
    there (unlike :func:`crop_cache`, a sliding layer is not restricted to its window): what the prefix
    cache stores."""
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", False):
            continue
        first = _held_from(layer)
        keep = max(0, length - first)
        layer.keys = layer.keys[:, :, :keep]
        layer.values = layer.values[:, :, :keep]
        if _sliding(layer):
            layer.cumulative_length = length


def follow_lengths(cache: Any, source: Any) -> None:
    """After ``source``'s keys/values were appended layer by layer to the empty ``cache``: its
    sliding layers say they have seen as many positions as ``source``'s (an update counts only the
    positions it was given, and a sliding layer may hold fewer than it has seen)."""
    for dst, src in zip(cache.layers, source.layers, strict=True):
        if _sliding(dst):
            dst.cumulative_length = int(src.get_seq_length())


def held(*caches: Any) -> tuple[int, int]:
    """What ``caches`` hold together: token positions (each cache's length) and bytes — of the key and
    value tensors' storage, each storage counted once (a cache cut back by :func:`cut_to` keeps a view
    of its longer storage, and that storage is what stays in memory). The figures a strategy reports as
    ``Output.kv_held_tokens`` / ``kv_held_bytes``."""
    tokens, storages = 0, {}
    for cache in caches:
        tokens += int(cache.get_seq_length())
        for layer in cache.layers:
            for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if tensor is None or tensor.numel() == 0:
                    continue
                storage = tensor.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
    return tokens, sum(storages.values())


def output_holding(
    hf: Any, tokens: list[int], reason: str, caches: Sequence[Any] | None, **extra: Any
) -> Output:
    """A generation's :class:`Output` with what ``caches`` hold at its end (:func:`held`; ``None``:
    the session cannot tell, e.g. a draft in another runtime): ``kv_held_tokens`` / ``kv_held_bytes``."""
    kv_tokens, kv_bytes = held(*caches) if caches is not None else (None, None)
    return Output(
        token_ids=tokens,
        text=hf.decode(tokens),
        finish_reason=reason,  # type: ignore[arg-type]
        kv_held_tokens=kv_tokens,
        kv_held_bytes=kv_bytes,
        **extra,
    )
