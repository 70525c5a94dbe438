"""The public import path for strategy authors (``from workbench.strategy import field_help``): the
contract and the parameter helpers, defined in :mod:`workbench.core`."""

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
from workbench.core.strategy import Cancelled, NoConfig, Output, Probe, Prompt, Request, Session, Strategy
from workbench.core.variant import Variant

__all__ = [
    "COMMON_VARIANT_KEYS",
    "Cancelled",
    "ConfigField",
    "Device",
    "NoConfig",
    "Output",
    "Probe",
    "Prompt",
    "Request",
    "Session",
    "Strategy",
    "Variant",
    "build_config",
    "config_fields",
    "field_help",
    "model_field",
    "model_source_fields",
]
