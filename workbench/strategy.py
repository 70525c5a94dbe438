"""The public import path for strategy authors: the contract (:class:`Strategy` and what it loads,
generates and reports), the errors a strategy raises (``StrategyError``, ``ModelSourceError``, and
``error_context`` to re-raise with where it happened) and the parameter helpers, defined in
:mod:`workbench.core`::

    from workbench.strategy import Output, Probe, Request, Session, Strategy, Variant, field_help

The built-in strategies import from here and only here. ``workbench.Strategy`` (and the other names
``workbench`` exports) are the same objects, kept for code written against them.
"""

from __future__ import annotations

from workbench.core.config import (
    COMMON_VARIANT_KEYS,
    ConfigField,
    build_config,
    config_fields,
    field_help,
    model_field,
    model_source_fields,
)
from workbench.core.device import Device
from workbench.core.errors import ModelSourceError, StrategyError, error_context
from workbench.core.strategy import (
    Cancelled,
    ConfigT,
    FinishReason,
    NoConfig,
    Output,
    Probe,
    Prompt,
    Request,
    ScoreShape,
    Session,
    Strategy,
    TokenScores,
    Trace,
)
from workbench.core.variant import DTYPES, Dtype, Variant

__all__ = [
    "COMMON_VARIANT_KEYS",
    "DTYPES",
    "Cancelled",
    "ConfigField",
    "ConfigT",
    "Device",
    "Dtype",
    "FinishReason",
    "ModelSourceError",
    "NoConfig",
    "Output",
    "Probe",
    "Prompt",
    "Request",
    "ScoreShape",
    "Session",
    "Strategy",
    "StrategyError",
    "TokenScores",
    "Trace",
    "Variant",
    "build_config",
    "config_fields",
    "error_context",
    "field_help",
    "model_field",
    "model_source_fields",
]
