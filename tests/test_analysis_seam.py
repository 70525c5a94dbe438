"""The seam under the views: analysis computes from a run's loaded rows (``Store.load_run``), never from
the store, into frozen typed records; ``show``, ``show --json`` and the GUI's results build from the
same analysis of those rows."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import typing

import grimp
import pytest
from click.testing import CliRunner

import workbench.analysis
from workbench.analysis.run import RunAnalysis
from workbench.cli import cli
from workbench.store import LoadedRun, Store

#: what analysis may not reach, directly or through another module: the database and its driver
_DATABASE = ("workbench.store.db", "workbench.store.schema", "sqlite_utils", "sqlite3")


def _analysis_modules() -> list[str]:
    return [
        f"workbench.analysis.{m.name}"
        for m in pkgutil.iter_modules(workbench.analysis.__path__)
        if not m.ispkg
    ]


def test_analysis_imports_no_database_not_even_for_types():
    graph = grimp.build_graph("workbench", "sqlite_utils", cache_dir=None)
    for module in _analysis_modules():
        for database in _DATABASE:
            if database in graph.modules:
                chain = graph.find_shortest_chain(importer=module, imported=database)
                assert chain is None, f"{module} reaches the database: {' -> '.join(chain or ())}"


def test_no_analysis_function_takes_the_store():
    """No parameter of an analysis function is a store (by name or annotation), and the entries refuse
    one at run time with a clear error instead of reading through it."""
    for name in _analysis_modules():
        module = importlib.import_module(name)
        for attr, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != name:
                continue
            for param in inspect.signature(fn).parameters.values():
                annotation = str(param.annotation)
                assert param.name != "store" and "Store" not in annotation, f"{name}.{attr}({param.name})"


def test_the_entries_refuse_a_store(fake_run_db):
    from workbench.analysis.compare import compare_two_runs
    from workbench.analysis.run import analyze_run

    with Store(fake_run_db, create=False) as store:
        with pytest.raises(TypeError, match="LoadedRun"):
            analyze_run(store, 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="LoadedRun"):
            compare_two_runs(store, store.load_run(1))  # type: ignore[arg-type]


def _frozen_reachable(cls: type, seen: set[type]) -> list[str]:
    """Every dataclass reachable from ``cls`` through its fields' annotations that is not frozen, and
    every field typed ``Any`` or holding a mutable list/dict/set."""
    if cls in seen or not dataclasses.is_dataclass(cls):
        return []
    seen.add(cls)
    problems = []
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        problems.append(f"{cls.__name__} is not frozen")
    module = importlib.import_module(cls.__module__)
    hints = typing.get_type_hints(cls, vars(module) | _names())
    for field, hint in hints.items():
        if field not in {f.name for f in dataclasses.fields(cls)}:
            continue
        for t in _flatten(hint):
            if t is typing.Any:
                problems.append(f"{cls.__name__}.{field} is Any")
            elif t in (list, dict, set):
                problems.append(f"{cls.__name__}.{field} holds a mutable {t.__name__}")
            elif isinstance(t, type):
                problems += _frozen_reachable(t, seen)
    return problems


def _names() -> dict[str, object]:
    """Every name the analysis modules define or import (some only for type checking), so that
    get_type_hints resolves each field's annotation."""
    names: dict[str, object] = {}
    for name in [*_analysis_modules(), "workbench.store.loaded", "workbench.store.records"]:
        names.update(vars(importlib.import_module(name)))
    return names


def _flatten(hint: object) -> list[object]:
    origin = typing.get_origin(hint)
    if origin is None:
        return [hint]
    out: list[object] = [] if origin in (typing.Union, tuple) or "UnionType" in str(origin) else [origin]
    for arg in typing.get_args(hint):
        out += _flatten(arg)
    return out


def test_every_dataclass_reachable_from_the_analysis_is_frozen_and_typed():
    from workbench.analysis.compare import SideBySide, TwoRuns

    seen: set[type] = set()
    problems = [p for root in (RunAnalysis, SideBySide, TwoRuns) for p in _frozen_reachable(root, seen)]
    assert problems == []
    names = {c.__name__ for c in seen}
    # the walk reached the records one level down (it would pass vacuously otherwise)
    assert {"GroupSummary", "GroupQuality", "ServerFigures", "WorkloadVerdict", "Costs", "Trust"} <= names
    assert {"Verdict", "BreakEven", "RunQuality", "QualityFigures", "QualityVariantRecord"} <= names


def test_show_show_json_and_the_gui_build_from_the_same_analysis(fake_run_db, monkeypatch):
    """One analysis per view, of the rows the store's loader read: the text report, the JSON and the
    GUI's results are written from equal analyses (a view with its own route would differ or call
    the store itself)."""
    import workbench.analysis.run as run_module
    from workbench.gui.loading import load_results
    from workbench.report.data import run_data
    from workbench.report.model import render_text
    from workbench.report.run_report import build_run_report

    built: list[RunAnalysis] = []
    loads: list[LoadedRun] = []
    analyze, load = run_module.analyze_run, Store.load_run

    def recording(loaded: LoadedRun, *args: object, **kwargs: object) -> RunAnalysis:
        built.append(analyze(loaded, *args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    def loading(self: Store, ref: str | int | None) -> LoadedRun:
        loads.append(load(self, ref))
        return loads[-1]

    monkeypatch.setattr(run_module, "analyze_run", recording)
    monkeypatch.setattr(Store, "load_run", loading)
    shown = CliRunner().invoke(cli, ["show", "1", "--db", str(fake_run_db)], terminal_width=120)
    as_json = CliRunner().invoke(cli, ["show", "1", "--db", str(fake_run_db), "--json"])
    gui = load_results(fake_run_db, [1])
    assert shown.exit_code == 0 and as_json.exit_code == 0, shown.output + as_json.output
    assert len(built) == 3 and len(loads) == 3  # each view: one load, one analysis
    text, data, window = built
    assert text == data == window == gui.analysis
    assert loads[0] == loads[1] == loads[2]
    assert json.loads(as_json.stdout) == json.loads(json.dumps(run_data(data), default=str))
    report = render_text(build_run_report(text), detail=False, wide=False)
    assert report in shown.stdout
