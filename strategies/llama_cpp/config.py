"""The parameters of ``llama-cpp`` (its ``Config``) and the GGUF weight types (the ``speculative``
strategy's ``draft_gguf_type`` offers the same choices). Imports nothing of llama.cpp."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workbench.strategy import field_help

__all__ = ["GgufType", "LlamaCppConfig"]


#: the weight types llama.cpp can re-quantize a GGUF to (``as-is``: the file as given)
GgufType = Literal[
    "as-is", "F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_M", "Q4_K_S",
    "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K",
]  # fmt: skip


@dataclass
class LlamaCppConfig:
    gguf_type: GgufType = field_help(  # noqa: RUF009 (an immutable default, as everywhere)
        "weights as llama.cpp stores them: as-is = the GGUF file as given (the demo model: Q4_1); "
        "a type re-quantizes it once with llama_model_quantize (cached; from a quantized file the "
        "weights are de-quantized first, so F32/F16 of a Q4_1 file hold the Q4_1 values)",
        default="as-is",
    )
    n_batch: int = field_help("prompt tokens per prefill pass (llama.cpp's -b / -ub)", default=512)
    flash_attn: bool | None = field_help(
        "llama.cpp's flash attention (-fa); unset = on for a cuda device (as torch's SDPA flash "
        "attention on the same GPU), off on the CPU; needed for a quantized V cache",
        default=None,
    )
    kv_type: Literal["f16", "f32", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"] = field_help(
        "KV-cache element type for keys and values (-ctk/-ctv): quantized types need flash_attn = true",
        default="f16",
    )
    n_gpu_layers: int = field_help(
        "layers offloaded to the GPU (-ngl): -1 = all (the default on a cuda device), 0 on a cpu device; "
        "needs a llama-cpp-python built with CUDA (docs/runtimes.md)",
        default=-1,
    )
    n_ctx: int = field_help(
        "context size llama.cpp allocates its KV cache for; 0 = the model's training context", default=4096
    )

    def __post_init__(self) -> None:
        if self.n_batch < 1:
            raise ValueError(f"n_batch must be at least 1, got {self.n_batch}")
        if self.n_ctx < 0:
            raise ValueError(f"n_ctx must be 0 (the model's own) or positive, got {self.n_ctx}")
        if self.n_gpu_layers < -1:
            raise ValueError(f"n_gpu_layers must be -1 (all) or at least 0, got {self.n_gpu_layers}")
        if self.kv_type not in ("f16", "f32", "bf16") and self.flash_attn is not True:
            raise ValueError(
                f"kv_type = {self.kv_type!r} needs flash_attn = true (llama.cpp quantizes the V cache "
                "only with flash attention)"
            )
