"""``python -m workbench.gui [ARGS]`` is ``workbench gui [ARGS]``."""

from __future__ import annotations

import sys

from workbench.cli import cli

if __name__ == "__main__":
    cli(["gui", *sys.argv[1:]], prog_name="workbench")
