"""What the benchmark scripts share: their argument parser and common flags, the TOML of a spec's
variants and workloads, running a spec through the worker path, and the PASS / FAIL verdict (exit 1
on FAIL). Imported by the scripts as ``harness`` (they run from this folder's parent, with this
folder first on ``sys.path``); not a benchmark itself.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.run.recording import Progress, RunResult
    from workbench.spec.parse import Spec
    from workbench.store import Store

#: the model most benchmarks measure
DEMO_MODEL = "demo:smollm2-135m"


# -- arguments -----------------------------------------------------------------------------------


def parser(description: str, *, show_defaults: bool = False) -> argparse.ArgumentParser:
    """A benchmark's argument parser; ``show_defaults``: each option's help ends with its default."""
    if show_defaults:
        return argparse.ArgumentParser(
            description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
        )
    return argparse.ArgumentParser(description=description)


def summary(doc: str | None) -> str:
    """A script docstring's first paragraph: its ``--help`` description."""
    return (doc or "").split("\n\n")[0]


def add_repetitions(parser: argparse.ArgumentParser, default: int, help: str | None = None) -> None:
    """``--repetitions`` / ``-r``: measured repetitions (rounds) per prompt."""
    parser.add_argument("--repetitions", "-r", type=int, default=default, help=help)


def add_db(parser: argparse.ArgumentParser, help: str = "keep the results database here") -> None:
    """``--db PATH``: keep the results database (a temporary one otherwise, :func:`result_db`)."""
    parser.add_argument("--db", type=Path, help=help)


def add_report(parser: argparse.ArgumentParser, help: str) -> None:
    """``--report DB``: run nothing, report on a database kept with ``--db``."""
    parser.add_argument("--report", type=Path, metavar="DB", help=help)


def names(value: str) -> list[str]:
    """A comma-separated flag's names (``--variants a,b``), blanks dropped."""
    return [name.strip() for name in value.split(",") if name.strip()]


# -- the spec --------------------------------------------------------------------------------------


def variant_toml(name: str, body: str = "", *, model: str = DEMO_MODEL, dtype: str = "float32") -> str:
    """A ``[[variants]]`` table: ``name``, ``model``, ``dtype``, then ``body`` (its other keys, TOML
    lines ending in a newline)."""
    return f'\n[[variants]]\nname = "{name}"\nmodel = "{model}"\ndtype = "{dtype}"\n{body}'


def workload_toml(name: str, max_new_tokens: int, limit: int | None = None) -> str:
    """A ``[[workloads]]`` table of a built-in workload: its first ``limit`` prompts (``None``: all)."""
    limit_line = f"limit = {limit}\n" if limit is not None else ""
    return f'\n[[workloads]]\nname = "{name}"\n{limit_line}max_new_tokens = {max_new_tokens}\n'


# -- running ---------------------------------------------------------------------------------------


def result_db(db: Path | None, name: str) -> Path:
    """``db``, or ``name`` in a new temporary folder (kept: the path is printed with the results)."""
    return db or Path(tempfile.mkdtemp(prefix="wb-bench-")) / name


def run_spec(spec: Spec | str, store: Store) -> RunResult:
    """Run ``spec`` (a :class:`Spec` or its TOML) through ``RunExecutor`` (the worker path) into
    ``store``, its progress messages on stderr."""
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec

    def progress(p: Progress) -> None:
        if p.message:
            print(f"  [{p.done}/{p.total}] {p.message}", file=sys.stderr)

    return RunExecutor(parse_spec(spec) if isinstance(spec, str) else spec, store, on_progress=progress).run()


# -- figures ---------------------------------------------------------------------------------------


def geomean(values: Sequence[float]) -> float:
    """The geometric mean; NaN for none."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def median(values: Sequence[float]) -> float:
    """The median; NaN for none."""
    return statistics.median(values) if values else float("nan")


# -- the verdict -----------------------------------------------------------------------------------


def check_verdict(checks: Iterable[tuple[str, bool]]) -> int:
    """Print each check (``PASS  label`` / ``FAIL  label``) after a blank line, then ``PASS`` when all
    passed, else ``FAIL``; the exit status (0 / 1)."""
    checks = list(checks)
    print()
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    passed = all(ok for _, ok in checks)
    print("\nPASS" if passed else "\nFAIL")
    return 0 if passed else 1


def verdict(problems: Sequence[str], *, inline: bool = False, bullet: str = "  - ") -> int:
    """``PASS`` when there are no ``problems``, else ``FAIL`` and the problems: one a line after
    ``bullet``, or ``inline`` on the ``FAIL:`` line, separated by ``;``. The exit status (0 / 1)."""
    if not problems:
        print("PASS")
        return 0
    if inline:
        print("FAIL: " + "; ".join(problems))
    else:
        print("FAIL")
        for problem in problems:
            print(f"{bullet}{problem}")
    return 1
