"""A GGUF file de-quantized into a safetensors model folder that transformers loads (the demo model,
a ``.gguf`` source). torch and transformers are imported inside :func:`convert_gguf`, so this module
imports without them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.core.errors import ModelSourceError, error_context

from .cache import staged

__all__ = ["convert_gguf", "is_converted"]

_DONE = ".workbench-converted"


def is_converted(folder: Path) -> bool:
    return (folder / _DONE).exists()


def convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize a GGUF into a safetensors model folder (weights, config, tokenizer).

    transformers refuses ``save_pretrained`` on a model loaded from GGUF while it still carries the
    GGUF quantizer, so both ``hf_quantizer`` and ``quantization_config`` are cleared first. The folder
    is written beside the target and renamed into place (:func:`.cache.staged`), so a crash never leaves
    half a model.
    """
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelSourceError(
            f"converting a GGUF needs the engine extra (pip install 'llm-workbench[engine]'): {exc}"
        ) from None
    with staged(target, directory=True) as staging:
        with error_context(f"cannot load GGUF {gguf}", ModelSourceError), _one_reader():
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
            )
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / _DONE).write_text(f"converted from {gguf.name}\n")


@contextlib.contextmanager
def _one_reader() -> Iterator[None]:
    """Parse the GGUF once while converting it: transformers opens a new ``gguf.GGUFReader`` for the
    tokenizer, the config and the weights, and each parse of a file's metadata (the vocabulary and its
    merges, field by field in Python) took ~8 s of the demo model's 30 s conversion here. A reader is
    a read-only view of the memory-mapped file, so one per path serves them all."""
    import gguf as gguf_lib

    original = gguf_lib.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: Any = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf_lib.GGUFReader = reader  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf_lib.GGUFReader = original  # type: ignore[misc]
