"""Variants in another Python environment (``python = ".../bin/python"``): check the interpreter before a
run, and say what it has.

The parent calls :func:`probe` once per interpreter before anything is recorded. It starts
``<python> -m workbench.run.interpreter``, which answers on stdout with one marked JSON line: its worker
protocol (:data:`workbench.run.events.PROTOCOL`), workbench version, Python version and library
versions, and for each variant sent on stdin whether it can run there (the variant rebuilt from its
spec keys, its strategy found and ``available()``, its ``preflight``). A path that is not a Python, a
Python without the workbench, another protocol or a strategy that cannot run there is one line
(:class:`~workbench.core.errors.SpecError` / :class:`~workbench.core.errors.StrategyError`: exit 2).

The other environment runs as it is installed: isolated (``python -I``), so this process's
``PYTHONPATH`` and the current folder do not shadow its own packages, here and in the variant's worker
(:func:`command`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.core.errors import SpecError, StrategyError
from workbench.formatting import duration

__all__ = ["PROBE_TIMEOUT_S", "Interpreter", "child_environment", "command", "main", "probe"]

#: seconds the interpreter gets to answer (it imports the workbench and the strategies' modules)
PROBE_TIMEOUT_S = 180.0
_MARK = "workbench-interpreter: "
_INSTALL = "install this workbench there: {python} -m pip install --no-deps -e <workbench checkout> (docs/runtimes.md)"


@dataclass(frozen=True)
class Interpreter:
    """What a variant's interpreter said about itself."""

    executable: str
    python: str  # its version, e.g. "3.11.7"
    workbench: str
    packages: dict[str, str] = field(default_factory=dict)


def command(python: str | None, module: str) -> list[str]:
    """The command line that runs ``module`` with ``python`` (None: this interpreter). Another
    interpreter runs isolated (``-I``): this process's ``PYTHONPATH``/``PYTHONHOME`` (which point at
    this environment's packages), the user's site-packages and the current folder (a workbench
    checkout, say) stay out of its path, so it runs its own libraries; ``-u`` as
    ``PYTHONUNBUFFERED`` (ignored there) would."""
    if python is None:
        return [sys.executable, "-m", module]
    return [python, "-I", "-u", "-m", module]


def child_environment() -> dict[str, str]:
    """The environment of a worker process (or a probe)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}


_probed: dict[tuple[str, str], Interpreter] = {}


def probe(python: str, variants: Sequence[Any], *, timeout: float = PROBE_TIMEOUT_S) -> Interpreter:
    """Check that ``python`` runs the workbench with this worker protocol and can run ``variants``
    (:class:`~workbench.core.variant.Variant`, all with this ``python``). Raises a one-line
    :class:`SpecError` (the interpreter) or :class:`StrategyError` (a variant there). A successful
    answer is remembered for the same interpreter and variants (the CLI and the executor both check)."""
    from workbench import __version__
    from workbench.run.events import PROTOCOL

    names = ", ".join(f"'{v.name}'" for v in variants)
    where = f"variant {names}: 'python' {python}"
    request = json.dumps([v.to_dict() for v in variants])
    key = (python, request)
    if key in _probed:
        return _probed[key]
    try:
        proc = subprocess.run(
            command(python, "workbench.run.interpreter"),
            input=request,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            env=child_environment(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SpecError(f"{where} did not answer within {duration(timeout)}") from None
    except OSError as exc:  # not an executable program (exec format error, permission...)
        raise SpecError(f"{where} cannot be started: {exc.strerror or exc}") from None
    answer = _answer(proc.stdout)
    if answer is None:
        raise SpecError(f"{where} {_why_no_answer(proc, python)}")
    if answer.get("protocol") != PROTOCOL:
        raise SpecError(
            f"{where} has workbench {answer.get('workbench')} (worker protocol {answer.get('protocol')}); "
            f"this is workbench {__version__} (protocol {PROTOCOL}): {_INSTALL.format(python=python)}"
        )
    malformed = _malformed(answer)
    if malformed:
        raise SpecError(
            f"{where} answered the interpreter check with a malformed reply ({malformed}): "
            f"{_INSTALL.format(python=python)}"
        )
    for variant in variants:
        error = (answer.get("variants") or {}).get(variant.name)
        if error:
            raise StrategyError(f"variant '{variant.name}' (python {python}): {error}")
    found = Interpreter(
        executable=str(answer.get("executable") or python),
        python=str(answer.get("python") or ""),
        workbench=str(answer.get("workbench") or ""),
        packages={str(k): str(v) for k, v in (answer.get("packages") or {}).items()},
    )
    _probed[key] = found
    return found


def _answer(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(_MARK):
            try:
                data = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _malformed(answer: dict[str, Any]) -> str | None:
    """What is wrong with an answer of the right protocol, or None: ``variants`` maps each name to
    its error or null, ``packages`` each library to its version, the rest are strings."""
    variants = answer.get("variants")
    if variants is not None and (
        not isinstance(variants, dict) or not all(v is None or isinstance(v, str) for v in variants.values())
    ):
        return "'variants' is not a table of variant names to errors"
    packages = answer.get("packages")
    if packages is not None and not isinstance(packages, dict):
        return "'packages' is not a table of library versions"
    for key in ("executable", "python", "workbench"):
        if answer.get(key) is not None and not isinstance(answer[key], str):
            return f"'{key}' is not a string"
    return None


def _why_no_answer(proc: subprocess.CompletedProcess[str], python: str) -> str:
    """One line for an interpreter that did not answer: no workbench, an older one, not a Python."""
    lines = [line.strip() for line in (proc.stderr or "").splitlines() if line.strip()]
    last = lines[-1][:300] if lines else ""
    if "No module named 'workbench'" in (proc.stderr or "") or "No module named workbench" in last:
        return f"has no workbench installed: {_INSTALL.format(python=python)}"
    if "workbench.run.interpreter" in (proc.stderr or "") and "No module named" in (proc.stderr or ""):
        return f"has an older workbench (no interpreter check): {_INSTALL.format(python=python)}"
    if last:
        return f"is not a Python that runs the workbench (exit code {proc.returncode}): {last}"
    return f"is not a Python that runs the workbench (exit code {proc.returncode}, it printed nothing)"


def main() -> int:
    """The other side: answer for this interpreter and the variants on stdin (a JSON list)."""
    from workbench import __version__
    from workbench.run.environment import package_versions
    from workbench.run.events import PROTOCOL

    # What strategies print on import must not be taken for the answer: it leaves on the real stdout.
    answer_stream = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        request = json.loads(sys.stdin.read() or "[]")
    except ValueError:
        request = []
    answer = {
        "protocol": PROTOCOL,
        "workbench": __version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "packages": package_versions(),
        "variants": {str(data.get("name")): _check(data) for data in request if isinstance(data, dict)},
    }
    answer_stream.write(_MARK + json.dumps(answer) + "\n")
    answer_stream.flush()
    return 0


def _check(data: dict[str, Any]) -> str | None:
    """Why the variant cannot run in this interpreter, or None."""
    from workbench.core import registry
    from workbench.core.errors import WorkbenchError, describe_exception
    from workbench.spec.parse import variant_from_dict

    try:
        variant = variant_from_dict(data)
        strategy = registry.get(variant.strategy_ref or variant.strategy)()
        reason = strategy.available()
        if reason:
            return f"strategy '{variant.strategy}' is not available there: {reason}"
        strategy.preflight(variant)
    except WorkbenchError as exc:
        return str(exc)
    except Exception as exc:
        return describe_exception(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
