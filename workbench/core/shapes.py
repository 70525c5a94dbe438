"""What a model's shape (``Session.model_shape``) says about its memory traffic."""

from __future__ import annotations

from typing import Any

__all__ = ["kv_bytes_per_token"]


def kv_bytes_per_token(shape: dict[str, Any] | None) -> float | None:
    """KV-cache bytes one token adds: keys and values, in every layer, for every KV head."""
    if not shape:
        return None
    try:
        return float(2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * shape["bytes_per_element"])
    except (KeyError, TypeError):
        return None
