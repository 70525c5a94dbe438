"""The results view's loader in thread mode (the packaged viewer's): the thread never imports a module.

Two threads importing at once can deadlock in CPython's per-module import locks (the packaged viewer
once died of it at start). So a loader thread's modules are imported in the calling thread first, and
these tests check it in a fresh interpreter: a finder on ``sys.meta_path`` notes which thread asks
for each workbench module while a run, and two runs side by side, are loaded through the loader; and
the start-up failure itself, made deterministic with an import held up in the loader's thread.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

SECOND_RUN = """
name = "second"
repetitions = 1
warmup = 0

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.5

[[workloads]]
name = "code"
limit = 1
max_new_tokens = 4
"""

# argv: the database, then "warm" (warm_up() before the loads) or "cold" (the first submit imports)
SCRIPT = r"""
import json, sys, threading
from pathlib import Path

asked = []  # (module, asked by the main thread?)


class Log:
    def find_spec(self, name, path=None, target=None):  # only modules not imported yet get here
        if name.startswith("workbench"):
            asked.append((name, threading.current_thread() is threading.main_thread()))
        return None


sys.meta_path.insert(0, Log())
from workbench.gui.loading import ResultsLoader

loader = ResultsLoader(processes=False)
if sys.argv[2] == "warm":
    loader.warm_up()
results = []
for run_ids in ((1,), (1, 2)):
    done = threading.Event()
    loader.submit(Path(sys.argv[1]), run_ids, lambda r, d=done: (results.append(r), d.set()))
    assert done.wait(120), "the load did not finish"
loader.close()
print(json.dumps({
    "off_main": sorted({name for name, main in asked if not main}),
    "loaded": [getattr(r, "title", repr(r)) for r in results],
    "verdicts": [len(getattr(r, "verdicts", [])) for r in results],
}))
"""


@pytest.fixture(scope="module")
def two_run_db(fake_run_db, tmp_path_factory):
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    path = tmp_path_factory.mktemp("loader") / "results.db"
    shutil.copy(fake_run_db, path)
    with Store(path) as store:
        assert RunExecutor(parse_spec(SECOND_RUN), store).run().status == "ok"
    return path


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_loader_thread_imports_nothing(two_run_db, start):
    env = {**os.environ, "WORKBENCH_GUI_LOADER": "thread"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(two_run_db), start],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded"] == ["Run 1 — fake levers (ok)", "Compare run 1 (fake levers) vs run 2 (second)"]
    assert all(n > 0 for n in out["verdicts"])  # the targets' code path ran (the built-ins' defaults)
    assert out["off_main"] == [], out["off_main"]


# The start-up failure itself, made deterministic: the loader thread, should it import, is held up
# for 0.5 s at the start of workbench.spec's __init__ (as slow as a frozen app's archive can make an
# import), while the UI thread imports the spec parser, as the builder does. With both importing,
# one of them fails (a deadlock detected, then a partially initialised module).
SLOW_SPEC_PACKAGE = r"""
import importlib.machinery, sys, threading, time

entered = threading.Event()


class Slow:
    def find_spec(self, name, path=None, target=None):
        if name != "workbench.spec" or threading.current_thread() is threading.main_thread():
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader.exec_module

        def exec_module(module):
            entered.set()
            time.sleep(0.5)
            real(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Slow())
import workbench.gui.loading as loading

errors = []
ready = loading._ready


def logged():
    try:
        return ready()
    except BaseException as exc:
        errors.append(f"loader thread: {type(exc).__name__}: {exc}")
        raise


loading._ready = logged
loader = loading.ResultsLoader(processes=False)
loader.warm_up()
entered.wait(2)
try:
    import workbench.spec.parse
except Exception as exc:
    errors.append(f"UI thread: {type(exc).__name__}: {exc}")
loader._pool().submit(int).result()
loader.close()
print("; ".join(errors) or "ok")
"""


def test_the_ui_thread_imports_while_the_loader_warms_up():
    env = {**os.environ, "WORKBENCH_GUI_LOADER": "thread"}
    proc = subprocess.run(
        [sys.executable, "-c", SLOW_SPEC_PACKAGE], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
