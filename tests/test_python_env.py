"""A variant's ``python``: its worker runs in another interpreter. The path checks, the interpreter probe
(not a Python, no workbench, another protocol, a strategy that cannot run there: one line, exit 2,
nothing recorded) and a run whose second variant's worker is another interpreter (a throwaway venv
that sees this workbench through a .pth file), on the fake strategy. The real second environment,
with another transformers, is tests/integration/test_second_python.py."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import workbench
from workbench.analysis.run import analyze_run
from workbench.cli import cli
from workbench.core.errors import SpecError, StrategyError
from workbench.report.documents import markdown_report
from workbench.run.execute import RunExecutor, preflight_spec
from workbench.run.interpreter import command, probe
from workbench.spec.parse import parse_spec
from workbench.store import Store

SPEC = """
name = "py"
repetitions = 1
warmup = 0
[[variants]]
name = "here"
strategy = "fake"
[[variants]]
name = "there"
strategy = "fake"
python = "{python}"
{extra}
[[workloads]]
name = "code"
limit = 2
max_new_tokens = 4
"""


def make_spec(python: str | Path, extra: str = "", **kwargs):
    return parse_spec(SPEC.format(python=python, extra=extra), **kwargs)


def bare_venv(path: Path) -> Path:
    """A real Python environment without pip and without the workbench (about a second)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    assert python.exists()
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def other_python(tmp_path_factory) -> Path:
    """Another interpreter that runs *this* workbench: a venv whose .pth puts this checkout, then this
    environment's libraries (click, sqlite-utils... and the entry points' metadata), on its path."""
    python = bare_venv(tmp_path_factory.mktemp("other") / "venv")
    checkout = Path(workbench.__file__).resolve().parents[1]
    paths = [str(checkout), *site.getsitepackages()]
    (site_packages(python) / "workbench-under-test.pth").write_text("\n".join(paths) + "\n")
    return python


# -- the spec key ---------------------------------------------------------------------------------


def test_python_path_is_made_absolute_relative_to_the_spec(tmp_path, other_python):
    (tmp_path / "env").mkdir()
    link = tmp_path / "env" / "py"
    link.symlink_to(other_python)
    spec = make_spec("env/py", base_dir=tmp_path)
    there = spec.variants[1]
    assert there.python == str(link)  # absolute, the link kept (a venv's python is a link)
    assert there.to_dict()["python"] == str(link)
    assert spec.variants[0].python is None and "python" not in spec.variants[0].to_dict()
    assert make_spec("./env/py", base_dir=tmp_path).variants[1].python == str(link)
    # a bare name is a command on PATH
    assert make_spec("sh").variants[1].python == shutil.which("sh")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/no/such/python", "'python' /no/such/python does not exist"),
        ("no-such-python-command", "is not a path and not a command on PATH"),
        ("", "'python' must be the path of a Python interpreter"),
    ],
)
def test_a_python_that_is_not_there_is_one_spec_error(value, message):
    with pytest.raises(SpecError, match=message):
        make_spec(value)


def test_a_folder_or_a_file_that_cannot_run_is_refused_with_a_hint(tmp_path):
    with pytest.raises(SpecError, match=r"is a folder; give its interpreter, e\.g\. .*bin/python"):
        make_spec(tmp_path)
    text = tmp_path / "python.txt"
    text.write_text("not a program")
    with pytest.raises(SpecError, match="is not executable"):
        make_spec(text)


def test_python_with_a_number_is_a_type_error():
    with pytest.raises(SpecError, match="'python' must be the path"):
        parse_spec(SPEC.format(python="x", extra="").replace('python = "x"', "python = 3"))


# -- the probe: what answers at that path ----------------------------------------------------------


def test_an_executable_that_is_not_a_program_cannot_be_started(tmp_path):
    fake = tmp_path / "python"
    fake.write_bytes(b"\x00\x01 not an executable format")
    fake.chmod(0o755)
    with pytest.raises(SpecError, match=r"variant 'there': 'python' .* cannot be started: Exec format error"):
        preflight_spec(make_spec(fake))


def test_a_program_that_is_not_a_python_says_what_it_printed(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'I am not a Python' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(
        SpecError, match=r"is not a Python that runs the workbench \(exit code 1\): I am not a Python"
    ):
        preflight_spec(make_spec(fake))


def test_a_python_without_the_workbench_says_how_to_install_it(tmp_path, monkeypatch):
    python = bare_venv(tmp_path / "bare")
    # this process's PYTHONPATH (a checkout under test) is not passed on: the venv runs as installed
    monkeypatch.setenv("PYTHONPATH", str(Path(workbench.__file__).resolve().parents[1]))
    with pytest.raises(SpecError) as info:
        preflight_spec(make_spec(python))
    message = str(info.value)
    assert message.startswith(f"variant 'there': 'python' {python} has no workbench installed")
    assert f"{python} -m pip install --no-deps -e" in message and "\n" not in message


def test_a_workbench_of_another_protocol_is_refused(tmp_path):
    python = bare_venv(tmp_path / "old")
    package = site_packages(python) / "workbench"
    (package / "run").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0.0.1'\n")
    (package / "run" / "__init__.py").write_text("")
    (package / "run" / "interpreter.py").write_text(
        'print("workbench-interpreter: " + \'{"protocol": 0, "workbench": "0.0.1"}\')\n'
    )
    from workbench.run.events import PROTOCOL

    expected = rf"has workbench 0\.0\.1 \(worker protocol 0\); this is workbench .* \(protocol {PROTOCOL}\)"
    with pytest.raises(SpecError, match=expected):
        preflight_spec(make_spec(python))


def test_a_strategy_that_cannot_run_there_is_named_with_the_interpreter(tmp_path, monkeypatch, other_python):
    # a strategy module importable here only (on this process's path, not the other interpreter's)
    (tmp_path / "only_here.py").write_text("from workbench.testing import FakeStrategy as Strategy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = make_spec(other_python).variants[1]
    spec = parse_spec(
        SPEC.format(python=other_python, extra="").replace(
            'strategy = "fake"\npython', 'strategy = "only_here:Strategy"\npython'
        )
    )
    with pytest.raises(StrategyError, match=rf"variant 'there' \(python {other_python}\): .*only_here"):
        preflight_spec(spec)


def test_the_cli_refuses_a_bad_python_before_anything_is_recorded(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(python=fake, extra=""))
    db = tmp_path / "results.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: variant 'there': 'python' "), result.output
    assert "it printed nothing" in lines[0]
    assert not db.exists()


# -- a run with a worker in another interpreter ------------------------------------------------------


def test_a_variants_worker_runs_in_its_python_and_both_are_recorded(db_path, other_python):
    store = Store(db_path)
    result = RunExecutor(make_spec(other_python), store).run()
    assert result.status == "ok" and (result.ok, result.failed) == (4, 0)
    variants = {v["name"]: v for v in store.variants(result.run_id)}
    assert variants["here"]["python"] is None and variants["there"]["python"] == str(other_python)
    for v in variants.values():
        assert "llm-workbench" in json.loads(v["packages"])
    env = json.loads(store.resolve_run(result.run_id)["environment"])
    assert env["host"]["executable"] == sys.executable  # the machine as the workbench's own worker saw it
    there = env["variants"]["there"]
    assert there["python"] == str(other_python) and there["python_version"] == sys.version.split()[0]
    assert "packages" in there and "python" not in env["variants"]["here"]
    # show and the report say which interpreter and libraries each variant had
    shown = CliRunner().invoke(cli, ["show", str(result.run_id), "--db", str(db_path)])
    assert shown.exit_code == 0, shown.output
    header = next(
        line for line in shown.output.splitlines() if line.startswith("variant") and "python" in line
    )
    assert header.split()[-2:] == ["python", "libraries"]
    assert "(the workbench's)" in shown.output and other_python.name in shown.output
    report = markdown_report(analyze_run(store.load_run(result.run_id)))
    assert f"| {other_python} |" in report


def test_a_worker_that_dies_in_its_python_fails_only_its_variant(db_path, other_python):
    store = Store(db_path)
    result = RunExecutor(make_spec(other_python, extra="crash_after_trials = 1"), store).run()
    assert result.status == "partial"
    trials = store.trials(result.run_id)
    assert {t.status for t in trials if t.variant == "here"} == {"ok"}
    failed = [t for t in trials if t.variant == "there" and t.status == "failed"]
    assert failed and "worker process for 'there' died" in failed[0].error


def test_the_probe_answers_once_per_interpreter_and_variants(other_python):
    spec = make_spec(other_python)
    first = probe(str(other_python), [spec.variants[1]])
    assert first.executable == str(other_python) and first.python == sys.version.split()[0]
    assert first.workbench == workbench.__version__
    assert probe(str(other_python), [spec.variants[1]]) is first


def test_another_interpreter_runs_isolated_from_this_ones_path():
    assert command(None, "workbench.run.worker") == [sys.executable, "-m", "workbench.run.worker"]
    assert command("/other/bin/python", "m")[:2] == ["/other/bin/python", "-I"]
