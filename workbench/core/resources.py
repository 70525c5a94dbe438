"""Where the built-in resources (workloads, icons, stylesheet) are.

In the repository they sit in the top-level ``resources/`` folder (README.md, Layout); an installed wheel
carries the same folder as the package ``workbench._resources``; the packaged viewer (PyInstaller,
``packaging/``) has it as ``resources/`` in its bundle folder. ``WORKBENCH_RESOURCES`` overrides all.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path

__all__ = ["installed_root", "resource_path"]

_PACKAGE = Path(__file__).resolve().parents[1]  # the ``workbench`` folder


@cache
def _root() -> Path:
    if os.environ.get("WORKBENCH_RESOURCES"):
        return Path(os.environ["WORKBENCH_RESOURCES"])
    if getattr(sys, "frozen", False) and hasattr(sys, "_MEIPASS"):
        return Path(sys._MEIPASS) / "resources"
    installed = installed_root()
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "resources"  # the repository's


def installed_root() -> Path:
    """Where an installed wheel keeps ``resources/``: the package ``workbench._resources``, a folder
    inside ``workbench/`` (the packaged viewer's build collects it from there)."""
    return _PACKAGE / "_resources"


def resource_path(*parts: str) -> Path:
    return _root().joinpath(*parts)
