"""Where the built-in resources (workloads, icons, stylesheet) are.

In the repository they sit in the top-level ``resources/`` folder (design card); an installed wheel
carries the same folder as the package ``workbench._resources``; a packaged app may point
``WORKBENCH_RESOURCES`` at its copy.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

__all__ = ["resource_path"]


@cache
def _root() -> Path:
    if os.environ.get("WORKBENCH_RESOURCES"):
        return Path(os.environ["WORKBENCH_RESOURCES"])
    source_tree = Path(__file__).resolve().parent.parent / "resources"
    if source_tree.is_dir():
        return source_tree
    from importlib import resources

    return Path(str(resources.files("workbench._resources")))


def resource_path(*parts: str) -> Path:
    return _root().joinpath(*parts)
