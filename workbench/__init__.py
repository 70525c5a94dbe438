"""Workbench: compare LLM inference optimizations on your own hardware, prefill vs decode.

The public surface for scripts and plugin authors; see ``docs/`` for the guides.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("llm-workbench")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

from .errors import ModelSourceError, SpecError, StoreError, StrategyError, WorkbenchError
from .strategy import Cancelled, Output, Probe, Prompt, Request, Session, Strategy

__all__ = [
    "Cancelled",
    "ModelSourceError",
    "Output",
    "Probe",
    "Prompt",
    "Request",
    "Session",
    "SpecError",
    "StoreError",
    "Strategy",
    "StrategyError",
    "WorkbenchError",
    "__version__",
]
