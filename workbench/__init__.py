"""Workbench: compare LLM inference optimizations on your own hardware, prefill vs decode.

The public surface for scripts and plugin authors; see ``docs/`` for the guides. Strategy authors
import the contract from :mod:`workbench.strategy`; ``workbench.Strategy`` and the other contract
names here are the same objects, re-exported for code written against them.
"""

from __future__ import annotations

from typing import Any

from workbench.core.errors import ModelSourceError, SpecError, StoreError, StrategyError, WorkbenchError
from workbench.core.strategy import Cancelled, Output, Probe, Prompt, Request, Session, Strategy

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


__version__: str  # looked up on first use (below); declared for type checkers


def __getattr__(name: str) -> Any:
    # The version is looked up on first use: importlib.metadata costs ~0.1 s, which the desktop app's
    # start-up (window on screen before the slow imports) does not pay.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        global __version__
        try:
            __version__ = version("llm-workbench")
        except PackageNotFoundError:  # running from a source tree that was not installed
            __version__ = "0.0.0+unknown"
        return __version__
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
