"""The analysts' package: what ships in it (resources, the sample database), the viewer command and its
``--smoke`` check, the launcher's locale fix, the frozen-app paths. Building the package itself is
``packaging/build-linux.sh``; ``packaging/test-linux.sh`` checks the built artefacts (CI runs both)."""

from __future__ import annotations

import configparser
import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench import __version__
from workbench.cli import viewer

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "resources" / "sample" / "demo.db"
LAUNCHER = REPO / "packaging" / "linux" / "workbench-viewer"


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


# -- what ships ---------------------------------------------------------------------------------------


def test_every_resource_file_is_package_data():
    """A wheel (and so the packaged viewer, built from one) carries every file under resources/: each
    sub-folder is listed as a package and its files match its package-data globs."""
    setuptools = _pyproject()["tool"]["setuptools"]
    packages, data = set(setuptools["packages"]), setuptools["package-data"]
    missing = []
    for path in sorted((REPO / "resources").rglob("*")):
        if not path.is_file() or path.name == "README.md" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(REPO / "resources")
        package = ".".join(["workbench._resources", *rel.parent.parts])
        globs = data.get(package, [])
        if package not in packages or not any(fnmatch.fnmatch(path.name, g) for g in globs):
            missing.append(str(rel))
    assert missing == [], f"not in pyproject's packages/package-data: {missing}"


def test_every_python_package_folder_is_listed():
    """pyproject lists the packages by hand (two folders install under other names); a package folder
    missing from the list would be missing from every wheel, and so from the packaged viewer."""
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    names = {"workbench": "workbench", "strategies": "workbench_strategies"}
    found = set()
    for folder, name in names.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([name, *rel.parts]))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert setuptools["package-dir"]["workbench_strategies"] == "strategies"


def test_the_sample_database_is_a_small_finished_demo_run(tmp_path):
    import sqlite3

    from workbench.core.resources import resource_path
    from workbench.store import Store

    assert resource_path("sample", "demo.db") == SAMPLE
    assert SAMPLE.stat().st_size < 1_000_000
    assert not SAMPLE.with_name("demo.db-wal").exists()  # everything is in the one file
    with sqlite3.connect(SAMPLE) as conn:  # shipped migrated: a viewer may open it read-only
        applied = {row[0] for row in conn.execute("select name from _sqlite_migrations")}
    from workbench.store.schema import migrations

    assert {m.name for m in migrations._migrations} <= applied
    copy = tmp_path / "demo.db"  # opened as a copy: the test must not change the tracked file
    with sqlite3.connect(SAMPLE) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with Store(copy, create=False) as store:
        runs = store.runs()
        assert len(runs) == 1 and runs[0]["status"] == "ok" and runs[0]["name"].startswith("demo")
        assert {v["name"] for v in store.variants(runs[0]["id"])} >= {"baseline", "prompt-lookup"}
        assert store.trials(runs[0]["id"])  # measured trials, not only warm-ups


def test_the_icon_and_desktop_entry():
    from PySide6.QtGui import QImage

    icon = QImage(str(REPO / "resources" / "icons" / "workbench.png"))
    assert (icon.width(), icon.height()) == (256, 256)
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(REPO / "packaging" / "linux" / "workbench-viewer.desktop", encoding="utf-8")
    desktop = entry["Desktop Entry"]
    assert desktop["Type"] == "Application" and desktop["Terminal"] == "false"
    assert desktop["Exec"].split()[0] == "workbench-viewer" and desktop["Icon"] == "workbench-viewer"
    assert desktop["Categories"].endswith(";") and desktop["MimeType"].endswith(";")


# -- the viewer command ---------------------------------------------------------------------------------


def test_viewer_version_and_help():
    runner = CliRunner()
    result = runner.invoke(viewer, ["--version"], prog_name="workbench-viewer")
    assert result.exit_code == 0 and result.output.strip() == f"workbench-viewer, version {__version__}"
    result = runner.invoke(viewer, ["--help"], prog_name="workbench-viewer")
    assert result.exit_code == 0
    assert "Usage: workbench-viewer [OPTIONS] [DATABASE]" in result.output and "--smoke" in result.output


def test_viewer_bad_input_is_one_error_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(viewer, [str(tmp_path / "a.db"), "--db", str(tmp_path / "b.db")])
    assert (
        result.exit_code == 2 and result.output == "Error: give the database once: as DATABASE or with --db\n"
    )
    result = runner.invoke(viewer, ["--smoke", "--tab", "history"])
    assert result.exit_code == 2 and result.output.startswith("Error: --smoke takes only --db")


def _smoke(
    *args: str, env: dict[str, str] | None = None, command: str = "gui"
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workbench", command, "--smoke", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env or {})},
    )


def test_smoke_opens_the_sample_draws_the_headline_and_leaves_the_sample_alone():
    before = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    proc = _smoke()
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert "\n" not in line
    assert line.startswith(f"smoke ok: Workbench {__version__} (PySide6 ")
    assert ", offscreen), run 1 " in line and "from demo.db: 5 variants × 2 workloads" in line
    assert "headline chart 2000×" in line and 'font "' in line
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() == before  # it opened a copy
    assert not SAMPLE.with_name("demo.db-wal").exists()


def test_smoke_on_a_given_database(tmp_path):
    db = tmp_path / "mine.db"
    shutil.copyfile(SAMPLE, db)
    proc = _smoke("--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert " from mine.db: " in proc.stdout


def test_smoke_fails_when_qt_finds_no_font(tmp_path):
    """Without fonts Qt draws boxes and says nothing; the smoke test must say it."""
    (tmp_path / "fonts.conf").write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">'
        f"<fontconfig><dir>{tmp_path / 'none'}</dir><cachedir>{tmp_path / 'cache'}</cachedir></fontconfig>"
    )
    proc = _smoke(env={"FONTCONFIG_FILE": str(tmp_path / "fonts.conf")})
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: smoke test: Qt found no font")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("none.db", None, "smoke test: no results database at"),
        ("text.db", "hello", "is not a SQLite database"),
    ],
)
def test_smoke_bad_database_is_one_error_line(tmp_path, name, content, message):
    db = tmp_path / name
    if content is not None:
        db.write_text(content)
    proc = _smoke("--db", str(db))
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: ") and message in proc.stderr and "Traceback" not in proc.stderr


def test_smoke_of_an_empty_database_says_so(tmp_path):
    from workbench.store import Store

    Store(tmp_path / "empty.db").close()
    proc = _smoke("--db", str(tmp_path / "empty.db"))
    assert proc.returncode == 2 and "holds no runs" in proc.stderr


# -- the launcher -----------------------------------------------------------------------------------------


@pytest.fixture
def fake_install(tmp_path):
    """The launcher in a copy of the package's layout, with an app that prints what it was given."""
    top = tmp_path / "workbench-viewer"
    (top / "app").mkdir(parents=True)
    shutil.copy2(LAUNCHER, top / "workbench-viewer")
    app = top / "app" / "workbench-viewer"
    app.write_text(
        '#!/bin/sh\nprintf "LC_ALL=%s LC_CTYPE=%s LANG=%s charmap=%s\\n" "$LC_ALL" "$LC_CTYPE" "$LANG" '
        '"$(locale charmap 2>/dev/null)"\nfor a; do printf "[%s]" "$a"; done\n'
    )
    app.chmod(0o755)
    bin_dir = tmp_path / "bin"  # /usr/bin/workbench-viewer is a symbolic link to the launcher
    bin_dir.mkdir()
    (bin_dir / "workbench-viewer").symlink_to(top / "workbench-viewer")
    return bin_dir / "workbench-viewer"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not shutil.which("locale"), reason="the launcher is for Linux"
)
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "LC_ALL= LC_CTYPE=C.UTF-8 LANG= charmap=UTF-8"),
        ({"LANG": "C"}, "LC_ALL= LC_CTYPE=C.UTF-8 LANG=C charmap=UTF-8"),
        ({"LC_ALL": "C"}, "LC_ALL=C.UTF-8 LC_CTYPE= LANG= charmap=UTF-8"),
        ({"LANG": "C.UTF-8"}, "LC_ALL= LC_CTYPE= LANG=C.UTF-8 charmap=UTF-8"),  # already UTF-8: untouched
    ],
)
def test_the_launcher_gives_qt_a_utf8_locale_and_passes_the_arguments(fake_install, env, expected):
    proc = subprocess.run(
        [str(fake_install), "my results.db", "--smoke"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [expected, "[my results.db][--smoke]"]


# -- frozen (PyInstaller) paths ------------------------------------------------------------------------


def test_frozen_app_finds_resources_in_its_bundle_and_says_it_is_the_packaged_viewer(monkeypatch, tmp_path):
    from workbench.core import resources
    from workbench.gui.main_window import viewer_reason

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    monkeypatch.delenv("WORKBENCH_RESOURCES", raising=False)
    assert resources._root.__wrapped__() == tmp_path / "resources"
    assert "packaged viewer" in viewer_reason(True)  # also when viewer mode is asked for


def test_installed_layout_is_preferred_to_a_resources_folder_beside_the_package(monkeypatch, tmp_path):
    """In site-packages a top-level `resources/` may belong to another project: an installed wheel
    uses its own `workbench/_resources`."""
    from workbench.core import resources

    monkeypatch.setattr(resources, "installed_root", lambda: tmp_path)
    monkeypatch.delenv("WORKBENCH_RESOURCES", raising=False)
    assert resources._root.__wrapped__() == tmp_path
