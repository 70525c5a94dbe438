"""What the tests of the ``workbench`` command share: two small specs on the fake strategy, invoking
the command through click's CliRunner, and the check of a bad-input error."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from workbench.cli import cli

SPEC = """
name = "two-fakes"
repetitions = 2

[[variants]]
name = "slow"
strategy = "fake"
prefill_ms = 2
decode_ms_per_token = 0.5

[[variants]]
name = "fast"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.2

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 4
"""

ONE_VARIANT = """
name = "{name}"
repetitions = 1
warmup = 0

[[variants]]
name = "only"
strategy = "{strategy}"
prefill_ms = 0.5
decode_ms_per_token = 0.1

[[workloads]]
name = "code"
limit = 1
max_new_tokens = 3
"""


def invoke(*args: str | Path, **kwargs) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], **kwargs)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def assert_one_error_line(result: Result, *needles: str) -> str:
    """Bad input: exit 2, one 'Error: ...' line (stdout + stderr) naming the problem, no traceback."""
    text = result.output  # click >= 8.2: stdout and stderr interleaved
    assert result.exit_code == 2, text
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith("Error: "), text
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
