"""Bad input to the ``workbench`` command: exit 2 and one ``Error:`` line, nothing recorded lost; and
the specs ``workbench demo`` runs."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_helpers import ONE_VARIANT, assert_one_error_line, invoke, write

from workbench.testing.helpers import db_rows

# -- bad input: exit 2, one line ------------------------------------------------------------------


def test_malformed_toml(tmp_path):
    spec = write(tmp_path / "bad.toml", 'name = "x"\nrepetitions = \n')
    assert_one_error_line(invoke("run", spec, "--db", tmp_path / "r.db"), "invalid TOML", "line 2", "column")
    assert not (tmp_path / "r.db").exists()


def test_missing_spec_file(tmp_path):
    assert_one_error_line(
        invoke("run", tmp_path / "nope.toml", "--db", tmp_path / "r.db"), "spec file not found"
    )


def test_unknown_strategy(tmp_path):
    spec = write(tmp_path / "s.toml", ONE_VARIANT.format(name="x", strategy="nope"))
    assert_one_error_line(
        invoke("run", spec, "--db", tmp_path / "r.db"), "unknown strategy 'nope'", "baseline", "fake"
    )


def test_mistyped_variant_key(tmp_path):
    spec = write(tmp_path / "s.toml", ONE_VARIANT.format(name="x", strategy="fake") + "\n")
    text = spec.read_text(encoding="utf-8").replace(
        'strategy = "fake"', 'strategy = "fake"\ndtpye = "float32"'
    )
    spec.write_text(text, encoding="utf-8")
    assert_one_error_line(
        invoke("run", spec, "--db", tmp_path / "r.db"), "variant 'only'", "'dtpye'", "did you mean 'dtype'"
    )


def test_invalid_jsonl_line(tmp_path):
    (tmp_path / "mine.jsonl").write_text(
        '{"id": "a", "prompt": "fine"}\n{"id": "b", prompt}\n', encoding="utf-8"
    )
    spec = write(
        tmp_path / "s.toml",
        '[[variants]]\nname = "a"\nstrategy = "fake"\n[[workloads]]\nname = "mine"\nfile = "mine.jsonl"\n',
    )
    assert_one_error_line(
        invoke("run", spec, "--db", tmp_path / "r.db"), f"{tmp_path / 'mine.jsonl'}:2:", "not valid JSON"
    )


def test_missing_model_path(tmp_path):
    spec = write(
        tmp_path / "s.toml",
        '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "./does/not/exist"\n'
        '[[workloads]]\nname = "code"\n',
    )
    assert_one_error_line(invoke("run", spec, "--db", tmp_path / "r.db"), "./does/not/exist", "not found")


@pytest.fixture
def good_spec(tmp_path):
    return write(tmp_path / "good.toml", ONE_VARIANT.format(name="good", strategy="fake"))


def test_db_path_under_a_file(tmp_path, good_spec):
    (tmp_path / "afile").write_text("i am a file", encoding="utf-8")
    db = tmp_path / "afile" / "results.db"
    assert_one_error_line(invoke("run", good_spec, "--db", db), str(db))
    assert_one_error_line(invoke("runs", "--db", db), str(db))
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "i am a file"


def test_db_path_not_writable(tmp_path, good_spec):
    assert_one_error_line(invoke("run", good_spec, "--db", "/proc/x/results.db"), "/proc/x/results.db")


def test_db_path_is_a_folder(tmp_path, good_spec):
    assert_one_error_line(invoke("run", good_spec, "--db", tmp_path), "is a folder", str(tmp_path))


def test_not_a_sqlite_file(tmp_path, good_spec):
    db = tmp_path / "x.db"
    content = "these are my notes, not a database\n" * 20
    db.write_text(content, encoding="utf-8")
    assert_one_error_line(invoke("runs", "--db", db), "not a SQLite database", str(db))
    assert_one_error_line(invoke("run", good_spec, "--db", db), "not a SQLite database", str(db))
    assert_one_error_line(invoke("show", "1", "--db", db), "not a SQLite database")
    assert db.read_text(encoding="utf-8") == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.toml", "x.db"]  # no -wal/-journal left


def test_sqlite_file_that_is_not_a_results_db(tmp_path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("create table notes (x)")
    conn.commit()
    conn.close()
    assert_one_error_line(invoke("runs", "--db", db), "not a workbench results database")


def test_runs_on_a_missing_db(tmp_path):
    db = tmp_path / "missing.db"
    assert_one_error_line(invoke("runs", "--db", db), "no results database", str(db))
    assert_one_error_line(invoke("show", "--db", db), "no results database")
    assert_one_error_line(invoke("compare", "1", "--db", db), "no results database")
    assert not db.exists()


def test_nothing_recorded_is_lost(tmp_path, good_spec):
    db = tmp_path / "results.db"
    assert invoke("run", good_spec, "--db", db).exit_code == 0
    before = invoke("runs", "--db", db, "--json")
    trials_before = db_rows(db, "select * from trials")
    assert len(trials_before) == 1
    bad = write(
        tmp_path / "bad.toml",
        ONE_VARIANT.format(name="bad", strategy="fake").replace("limit = 1", "limt = 1"),
    )
    assert_one_error_line(invoke("run", bad, "--db", db), "'limt'", "did you mean 'limit'")
    after = invoke("runs", "--db", db, "--json")
    assert after.exit_code == 0
    assert json.loads(after.stdout) == json.loads(before.stdout)
    (run,) = json.loads(after.stdout)
    assert (run["id"], run["name"], run["status"], run["trials"]) == (1, "good", "ok", 1)
    assert db_rows(db, "select * from trials") == trials_before


def test_uncached_hub_model_offline_is_bad_input(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    spec = write(
        tmp_path / "hub.toml",
        '[[variants]]\nname = "a"\nmodel = "nobody-has/this-model-123"\n[[workloads]]\nname = "code"\n',
    )
    db = tmp_path / "r.db"
    assert_one_error_line(invoke("run", spec, "--db", db), "nobody-has/this-model-123", "variant 'a'")
    assert not db.exists()


def test_a_strategy_not_available_here_is_bad_input(tmp_path, monkeypatch):
    (tmp_path / "nowhere_mod.py").write_text(
        "from workbench.testing import FakeStrategy\n\n"
        "class Nowhere(FakeStrategy):\n    name = 'nowhere'\n\n"
        "    def available(self):\n        return 'needs a quantum computer'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = write(tmp_path / "spec.toml", ONE_VARIANT.format(name="q", strategy="nowhere_mod:Nowhere"))
    db = tmp_path / "r.db"
    assert_one_error_line(invoke("run", spec, "--db", db), "variant 'only'", "needs a quantum computer")
    assert not db.exists()


@pytest.mark.parametrize("name", ["demo.toml", "demo-full.toml"])
def test_packaged_demo_specs_are_valid(name):
    """The specs `workbench demo [--full]` runs parse, use registered strategies and four kinds of lever."""
    from workbench.core.resources import resource_path
    from workbench.run.plan import plan_run
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", name))
    kinds = {v.strategy for v in spec.variants}
    assert {"baseline", "onnxruntime-genai", "speculative", "prompt-lookup"} <= kinds
    workloads = {w.name for w in spec.workloads}
    assert workloads >= (
        {"conversation", "summarise-short"} if name == "demo.toml" else {"chat", "summarise", "code"}
    )
    plans = plan_run(spec)
    assert all(t.max_new_tokens <= spec.warmup_max_new_tokens for t in plans[0].trials if t.warmup)


def test_the_levers_spec_is_valid():
    from workbench.core.resources import resource_path
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", "levers.toml"))
    assert {"baseline", "prefix-cache", "context-trim"} <= {v.strategy for v in spec.variants}
    assert max(v.batch_size for v in spec.variants) > 1
    assert {w.name for w in spec.workloads} == {"chat", "summarise"}


def test_demo_full_leaves_out_runtimes_not_installed_and_says_so(monkeypatch, capsys):
    from workbench.cli.running import _available_variants
    from workbench.core import registry
    from workbench.core.resources import resource_path
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", "demo-full.toml"))
    llama = registry.get("llama-cpp")
    monkeypatch.setattr(llama, "available", lambda self: "llama-cpp-python is not installed: make llama-cpp")
    trimmed = _available_variants(spec)
    gone = [v.name for v in spec.variants if v.strategy == "llama-cpp"]
    assert gone and [v.name for v in trimmed.variants] == [
        v.name for v in spec.variants if v.name not in gone
    ]
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "leaving out 'q4_1-gguf', 'q4_k_m-gguf'" in err and "make llama-cpp" in err
    )
    assert "q4_1-gguf" not in trimmed.text and trimmed.workloads == spec.workloads
    monkeypatch.undo()
    assert all(registry.get(v.strategy)().available() is None for v in _available_variants(spec).variants)


def test_demo_help_offers_full():
    result = invoke("demo", "--help")
    assert result.exit_code == 0
    assert "--full" in result.output and "demo-full.toml" in result.output


def test_the_demo_keeps_its_intervals_in_fewer_trials():
    """The short demo: 3 repetitions with fresh workers (three process pairs: every speed-up has an
    interval); one 8-turn conversation for the baseline and the prefix cache, one report to summarise
    for the baseline and the decode levers."""
    from workbench.core.resources import resource_path
    from workbench.run.design import planned_trials
    from workbench.run.plan import plan_run
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", "demo.toml"))
    assert spec.repetitions == 3 and spec.workers == "per-repetition"
    assert {w.name: len(w.items) for w in spec.workloads} == {"conversation": 8, "summarise-short": 1}
    conversation, summarise = spec.workloads
    assert conversation.variants == ("baseline", "prefix-cache")
    assert summarise.variants is not None and "prefix-cache" not in summarise.variants
    plans = plan_run(spec)
    measured = sum(not t.warmup for p in plans for t in p.trials)
    assert measured == 3 * (2 * 8 + 4 * 1)
    assert planned_trials(spec, plans) <= 2 * measured


def test_the_demo_hint_says_how_much_longer_a_busy_machine_takes():
    from workbench.cli.running import DEMO_QUIET, demo_hint

    assert demo_hint(False, load=0.3, cores=2) == DEMO_QUIET
    busy = demo_hint(False, load=8.0, cores=2)
    assert busy.startswith(DEMO_QUIET) and "load 8.0 on 2 cores" in busy and "5.0x" in busy
    assert "40-60 min" in demo_hint(True, load=0.0, cores=2)
