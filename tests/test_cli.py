"""The ``workbench`` command through click's CliRunner, on the fake strategy and real SQLite files: help,
version and strategies, running specs, and browsing the recorded runs (runs, show, compare, the
design). Bad input and the packaged specs: tests/test_cli_input.py."""

from __future__ import annotations

import csv
import json
import re
import sqlite3

import pytest
from cli_helpers import ONE_VARIANT, SPEC, assert_one_error_line, invoke, write

from workbench import __version__
from workbench.testing.helpers import db_rows, text_section

# -- a recorded database shared by the read-only tests --------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two runs of SPEC into one DB; the second with --out and --json."""
    root = tmp_path_factory.mktemp("recorded")
    spec = write(root / "spec.toml", SPEC)
    db = root / "results.db"
    first = invoke("run", spec, "--db", db)
    out = root / "out"
    second = invoke("run", spec, "--db", db, "--out", out, "--json")
    return {"root": root, "spec": spec, "db": db, "first": first, "second": second, "out": out}


def test_help():
    result = invoke("--help")
    assert result.exit_code == 0
    for verb in ("run", "runs", "show", "compare", "strategies", "demo"):
        assert verb in result.output


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"workbench, version {__version__}"


def test_strategies_lists_baseline_and_fake():
    result = invoke("strategies")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:2] == ["strategy", "available"]
    by_name = {line.split()[0]: line for line in lines[2:] if line.strip() and not line[0].isspace()}
    assert set(by_name) >= {"baseline", "fake"}
    assert by_name["fake"].split()[1] == "yes"
    assert by_name["baseline"].split()[1] in ("yes", "no:")
    assert "prefill_ms" not in result.output  # parameters only with -v


def test_strategies_fit_120_columns_with_the_reason_wrapped(monkeypatch):
    from workbench.core import registry

    reason = "needs " + " ".join(f"part{i}" for i in range(40)) + " (docs/runtimes.md)"
    listed = registry.list_strategies()
    long = registry.StrategyInfo(
        "slow-thing", "somewhere:Slow", "A strategy that cannot run here", reason, None
    )
    monkeypatch.setattr(registry, "list_strategies", lambda: [*listed, long])
    result = invoke("strategies")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 120
    start = next(i for i, line in enumerate(lines) if line.startswith("slow-thing "))
    column = lines[0].index("available")
    rows = [lines[start]] + [line for line in lines[start + 1 :] if line.startswith(" ")]
    assert len(rows) > 2  # wrapped onto further lines of its row, in its column
    shown = " ".join(line[column : lines[0].index("description")].strip() for line in rows)
    assert shown.split() == f"no: {reason}".split()


def test_strategies_json():
    result = invoke("strategies", "--json")
    assert result.exit_code == 0, result.output
    data = {s["name"]: s for s in json.loads(result.stdout)}
    assert {"baseline", "fake"} <= set(data)
    fake = data["fake"]
    assert fake["available"] is True and fake["unavailable_reason"] is None
    assert fake["target"] == "workbench.testing:FakeStrategy"
    params = {p["name"]: p for p in fake["parameters"]}
    assert params["prefill_ms"]["default"] == 40.0
    assert params["prefill_ms"]["type"] == "float"
    assert "fail_on_prompt" in params
    assert isinstance(data["baseline"]["available"], bool)


def test_strategies_verbose_shows_parameters():
    result = invoke("strategies", "-v")
    assert result.exit_code == 0, result.output
    assert "fake (workbench.testing:FakeStrategy)" in result.output
    assert "prefill_ms = 40.0" in result.output
    assert "fixed time before the first token" in result.output
    assert "decode_ms_per_token" in result.output


# -- run ------------------------------------------------------------------------------------------


def test_run_exits_0_and_prints_the_table(recorded):
    result = recorded["first"]
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    out = result.stdout
    # the answer first: the verdict, then the main table, then where the time goes
    assert out.splitlines()[0].startswith("Run 1 'two-fakes' — ok")
    verdict = text_section(out, "Verdict")
    # (whether the CI excludes 1 depends on the machine's load: the fakes differ by ~2x)
    assert re.search(r"code:\s+fast [\d.]+x \[[\d.]+–[\d.]+\]\*? e2e", verdict), verdict
    table = text_section(out, "Per variant × workload").splitlines()[1:]
    assert table[0].split()[:2] == ["variant", "workload"]
    body = [line.split() for line in table[2:4]]
    assert [(r[0], r[1]) for r in body] == [("slow", "code"), ("fast", "code")]
    assert (
        out.index("Verdict") < out.index("Per variant") < out.index("Where the time goes (measured on slow)")
    )
    assert "Run 1 ok: 8 ok, 0 failed" in result.stderr


def test_run_records_trials_and_steps(recorded):
    db = recorded["db"]
    (run,) = db_rows(db, "select * from runs where id = 1")
    assert run["name"] == "two-fakes" and run["status"] == "ok"
    assert run["finished_at"] and run["started_at"]
    assert "prefill_ms = 2" in run["spec"]
    assert json.loads(run["environment"])  # host recorded
    trials = db_rows(db, "select * from trials where run_id = 1 order by id")
    # per variant: 2 prompts × 2 repetitions, and 1 warm-up per workload in each repetition's fresh
    # worker (workers = "per-repetition")
    assert len(trials) == 2 * (2 + 4)
    assert {t["status"] for t in trials} == {"ok"}
    assert sum(t["warmup"] for t in trials) == 4
    for t in trials:
        assert t["strategy"] == "fake" and t["workload"] == "code"
        assert t["output_tokens"] == 4 and t["input_tokens"] > 0
        assert t["ttft_ms"] > 0 and t["e2e_ms"] >= t["ttft_ms"]
    fast = [t for t in trials if t["variant"] == "fast" and not t["warmup"]]
    assert {t["matches_baseline"] for t in fast} == {1}  # same tokens as the baseline "slow"
    steps = db_rows(db, "select * from steps where trial_id = ? order by idx", [trials[0]["id"]])
    assert [s["n_tokens"] for s in steps] == [1, 1, 1, 1]


def test_runs_lists_them(recorded):
    result = invoke("runs", "--db", recorded["db"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["id", "name", "status", "started", "order", "variants", "trials", "failed"]
    first = lines[2].split()
    assert first[:3] == ["1", "two-fakes", "ok"]
    assert first[-4:] == ["interleaved", "2", "8", "0"]
    assert lines[3].split()[:3] == ["2", "two-fakes", "ok"]


def test_runs_json(recorded):
    result = invoke("runs", "--db", recorded["db"], "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["id"] for r in data] == [1, 2]
    assert data[0]["name"] == "two-fakes" and data[0]["status"] == "ok"
    assert (data[0]["variants"], data[0]["trials"], data[0]["failed"]) == (2, 8, 0)
    assert data[0]["baseline"] == "slow"


@pytest.mark.parametrize("ref", ["1", "latest"])
def test_show(recorded, ref):
    result = invoke("show", ref, "--db", recorded["db"])
    assert result.exit_code == 0, result.output
    run_id = "1" if ref == "1" else "2"
    assert f"Run {run_id} 'two-fakes' — ok" in result.output
    assert "Machine:" in result.output
    assert "slow" in result.output and "fast" in result.output
    # the phase of each workload and the advice, measured on the baseline variant
    assert "Where the time goes (measured on slow)" in result.stdout
    phase_line = next(
        line for line in result.stdout.splitlines() if line.strip().startswith("code:") and "% of e2e" in line
    )
    assert any(label in phase_line for label in ("prefill-heavy", "decode-heavy", "balanced"))
    assert "% of e2e" in phase_line


def test_show_json(recorded):
    result = invoke("show", "1", "--db", recorded["db"], "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run"]["id"] == 1 and data["run"]["status"] == "ok"
    assert isinstance(data["run"]["environment"], dict) and data["run"]["environment"]
    assert [v["name"] for v in data["variants"]] == ["slow", "fast"]
    assert {v["status"] for v in data["variants"]} == {"ok"}
    # 4 measured trials each; those the machine disturbed (a busy machine: waiting for a CPU) are left
    # out of n when the default rule excludes them
    assert [(s["variant"], s["workload"]) for s in data["summary"]] == [("slow", "code"), ("fast", "code")]
    for s in data["summary"]:
        assert s["n_ok"] == 4 - (s["n_disturbed"] if s["disturbed_excluded"] else 0)
    (phase,) = data["phases"]
    assert phase["workload"] == "code" and phase["variant"] == "slow"
    assert 0 < phase["prefill_share"] < 1 and phase["advice"]
    latest = json.loads(invoke("show", "--db", recorded["db"], "--json").stdout)
    assert latest["run"]["id"] == 2
    by_name = json.loads(invoke("show", "two-fakes", "--db", recorded["db"], "--json").stdout)
    assert by_name["run"]["id"] == 2  # a name means the latest run with that name


def test_compare(recorded):
    result = invoke("compare", "1", "--db", recorded["db"])
    assert result.exit_code == 0, result.output
    lines = text_section(result.stdout, "Per variant × workload").splitlines()[1:]
    assert "e2e x" in lines[0]  # x: always a speed-up
    slow, fast = (line.split() for line in lines[2:4])
    assert slow[0] == "slow" and fast[0] == "fast"
    assert "x" not in " ".join(slow[3:])  # the baseline has no speed-up of its own
    assert any(cell.endswith("x") for cell in fast)


def test_compare_json_with_baseline(recorded):
    result = invoke("compare", "1", "--db", recorded["db"], "--baseline", "fast", "--json")
    assert result.exit_code == 0, result.output
    data = {s["variant"]: s for s in json.loads(result.stdout)}
    assert data["fast"]["speedup_e2e"] is None
    assert data["slow"]["speedup_e2e"]["value"] < 1  # slow is slower than the baseline "fast"
    default = {
        s["variant"]: s for s in json.loads(invoke("compare", "1", "--db", recorded["db"], "--json").stdout)
    }
    assert default["slow"]["speedup_e2e"] is None
    assert default["fast"]["speedup_e2e"]["value"] > 1


def test_compare_with_baseline_text(recorded):
    result = invoke("compare", "1", "--db", recorded["db"], "--baseline", "fast")
    assert result.exit_code == 0, result.output
    slow = next(line for line in result.stdout.splitlines() if line.startswith("slow"))
    assert "x [" in slow


def test_compare_two_runs_matches_variants_by_name(recorded):
    # every trial kept: on a busy machine some are disturbed, and the default rule leaves them out
    result = invoke("compare", "1", "2", "--db", recorded["db"], "--json", "--include-disturbed")
    assert result.exit_code == 0, result.output
    data = {(c["variant"], c["workload"]): c for c in json.loads(result.stdout)}
    assert set(data) == {("slow", "code"), ("fast", "code")}
    slow = data[("slow", "code")]
    assert (slow["run_a"], slow["run_b"]) == (1, 2)
    # RUN_B over RUN_A: the ratio of the medians of each run (timings themselves vary on a busy machine)
    e2e = slow["speedup_e2e"]
    assert e2e["value"] == pytest.approx(slow["a"]["e2e_ms"]["value"] / slow["b"]["e2e_ms"]["value"])
    assert e2e["lo"] <= e2e["value"] <= e2e["hi"]
    assert slow["a"]["e2e_ms"]["n"] == 4 and slow["b"]["e2e_ms"]["n"] == 4
    text = invoke("compare", "1", "2", "--db", recorded["db"])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("variant "))  # the table
    header, _, first, second = lines[at : at + 4]
    assert "e2e x" in header and first.startswith("slow") and second.startswith("fast")
    assert "→" in first and "x" in first


def test_compare_two_runs_side_by_side_against_one_baseline(recorded):
    text = invoke("compare", "1", "2", "--db", recorded["db"], "--baseline", "fast")
    assert text.exit_code == 0, text.output
    assert "2:fast" in text.stdout and "1:slow" in text.stdout
    explicit = json.loads(
        invoke("compare", "1", "2", "--db", recorded["db"], "--baseline", "2:fast", "--json").stdout
    )
    by_variant = {s["variant"]: s for s in explicit}
    assert set(by_variant) == {"1:slow", "1:fast", "2:slow", "2:fast"}
    assert by_variant["2:fast"]["speedup_e2e"] is None
    assert by_variant["1:slow"]["speedup_e2e"] is not None


def test_compare_unknown_baseline(recorded):
    assert_one_error_line(
        invoke("compare", "1", "--db", recorded["db"], "--baseline", "zz"), "'zz'", "not in the run"
    )


def test_show_unknown_run(recorded):
    assert_one_error_line(invoke("show", "999", "--db", recorded["db"]), "no run '999'")
    assert_one_error_line(invoke("compare", "1", "999", "--db", recorded["db"]), "no run '999'")


def test_run_json_and_out(recorded):
    result = recorded["second"]
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # --json: stdout is only the comparison
    assert [s["variant"] for s in summary] == ["slow", "fast"]
    out = recorded["out"]
    names = {p.name for p in out.iterdir()}
    assert {"steps.csv", "summary.json", "trials.csv", "summary.csv", "summary.md", "headline.csv"} <= names
    assert {"headline.png", "headline.svg", "report.html"} <= names  # the gui extra is installed here
    with open(out / "trials.csv", newline="", encoding="utf-8") as f:
        trials = list(csv.DictReader(f))
    assert len(trials) == 12  # warm-ups (one per repetition's fresh workers) included
    assert {t["run_id"] for t in trials} == {"2"}
    assert {"variant", "ttft_ms", "tpot_ms", "e2e_ms", "warmup"} <= set(trials[0])
    with open(out / "steps.csv", newline="", encoding="utf-8") as f:
        steps = list(csv.DictReader(f))
    assert len(steps) == 12 * 4
    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert data["run"]["id"] == 2 and data["run"]["status"] == "ok"
    assert [s["variant"] for s in data["summary"]] == ["slow", "fast"]


def test_failed_trials_exit_3_and_are_recorded(tmp_path):
    spec = write(
        tmp_path / "spec.toml",
        SPEC.replace("repetitions = 2", "repetitions = 2\nwarmup = 0").replace(
            "decode_ms_per_token = 0.2\n", 'decode_ms_per_token = 0.2\nfail_on_prompt = "code-1"\n'
        ),
    )
    db = tmp_path / "r.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert "failed: fast/code/code-1: RuntimeError: fake failure on prompt 'code-1'" in result.stderr
    assert "Run 1 partial: 6 ok, 2 failed" in result.stderr
    (run,) = db_rows(db, "select * from runs")
    assert run["status"] == "partial"
    trials = db_rows(db, "select * from trials order by id")
    assert len(trials) == 8
    failed = [t for t in trials if t["status"] == "failed"]
    assert [(t["variant"], t["prompt_id"]) for t in failed] == [("fast", "code-1"), ("fast", "code-1")]
    for t in failed:
        assert "RuntimeError: fake failure on prompt 'code-1'" in t["error"]
        assert t["ttft_ms"] is None
    ok = [t for t in trials if t["status"] == "ok"]
    assert len(ok) == 6 and all(t["error"] is None for t in ok)
    assert {(t["variant"], t["prompt_id"]) for t in ok} == {
        ("slow", "code-1"),
        ("slow", "code-2"),
        ("fast", "code-2"),
    }
    listed = json.loads(invoke("runs", "--db", db, "--json").stdout)
    assert (listed[0]["status"], listed[0]["failed"]) == ("partial", 2)


def test_workbench_db_env_var(tmp_path, monkeypatch):
    db = tmp_path / "env" / "results.db"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    spec = write(tmp_path / "spec.toml", ONE_VARIANT.format(name="via-env", strategy="fake"))
    result = invoke("run", spec)
    assert result.exit_code == 0, result.output
    assert db.exists()
    assert str(db) in result.stderr
    listed = invoke("runs")
    assert listed.exit_code == 0, listed.output
    assert "via-env" in listed.output
    # --db wins over the variable
    other = tmp_path / "other.db"
    assert_one_error_line(invoke("runs", "--db", other), "no results database", str(other))


def test_run_with_import_path_strategy(tmp_path, monkeypatch):
    (tmp_path / "mytrick_cli.py").write_text(
        "from workbench.testing import FakeStrategy\n\nclass MyTrick(FakeStrategy):\n    name = 'my-trick-cli'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker process imports it too
    spec = write(tmp_path / "spec.toml", ONE_VARIANT.format(name="plugin", strategy="mytrick_cli:MyTrick"))
    result = invoke("run", spec, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.output


# -- the design: order, disturbed trials, the noise floor -----------------------------------------


def test_show_says_how_the_trials_ran_and_json_has_the_design(recorded):
    result = invoke("show", "1", "--db", recorded["db"])
    assert result.exit_code == 0, result.output
    assert "Order: interleaved" in result.output and "MDE" in result.output
    data = json.loads(invoke("show", "1", "--db", recorded["db"], "--json").output)
    assert data["design"]["order"] == "interleaved" and data["design"]["repetitions"] == 2
    (fast,) = [s for s in data["summary"] if s["variant"] == "fast"]
    assert fast["speedup_e2e"]["method"] == "paired" and fast["speedup_e2e"]["mde"] is not None
    assert {"n_disturbed", "disturbed_excluded"} <= set(fast)


def test_disturbed_trials_are_counted_and_left_out_when_asked(recorded, tmp_path):
    db = tmp_path / "copy.db"
    with sqlite3.connect(recorded["db"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # the database is in WAL mode: copying the file alone would miss pages
    with sqlite3.connect(db) as conn:  # one of the fast variant's 4 trials "waited for a CPU"
        conn.execute("update trials set disturbed = 0, disturbance = null where run_id = 1")
        conn.execute(
            "update trials set disturbed = 1, disturbance = 'waited 40 ms for a CPU while it ran 50 ms on one' "
            "where id = (select min(id) from trials where run_id = 1 and variant = 'fast' and warmup = 0)"
        )

    def fast_n(*flags):
        data = json.loads(invoke("show", "1", "--db", db, "--json", *flags).output)
        (fast,) = [s for s in data["summary"] if s["variant"] == "fast"]
        return fast["n_ok"], fast["speedup_e2e"]["n"], data["design"]["disturbed"]

    reason = ["waited 40 ms for a CPU while it ran 50 ms on one"]
    # 1 of 8, and 1 of the fast variant's 4: few and spread, so left out by default
    expected = {"disturbed": 1, "measured": 8, "excluded": True, "reasons": reason, "kept_because": None}
    assert fast_n() == (3, 3, expected)
    n_ok, pairs, rule = fast_n("--include-disturbed")
    assert (n_ok, pairs, rule["excluded"]) == (4, 4, False)
    text = invoke("show", "1", "--db", db).output
    assert (
        "1 of 8 trials disturbed (12%), left out of the speed-ups"
        in invoke("show", "1", "--db", db, "--detail").output
    )
    assert "Note: 1 trial disturbed (left out)" in text  # in the verdict's trust line
    assert "(1 disturbed, out)" in invoke("show", "1", "--db", db, "--wide").output  # the n column
    text = invoke("show", "1", "--db", db, "--include-disturbed", "--wide").output
    assert "Note: 1 trial disturbed (kept)" in text and "(1 disturbed)" in text
    text = invoke("show", "1", "--db", db, "--include-disturbed", "--detail").output
    assert "kept in the speed-ups (asked for)" in text


def test_noise_runs_a_variant_against_itself(tmp_path):
    spec = write(tmp_path / "aa.toml", SPEC)
    result = invoke("noise", spec, "--variant", "fast", "--repetitions", "3", "--db", tmp_path / "n.db")
    assert result.exit_code == 0, result.output
    assert "Noise floor: 'fast' against itself, interleaved, 3 repetitions" in result.output
    assert "A/A speed-up" in result.output and "MDE at 20 reps" in result.output
    rows = db_rows(tmp_path / "n.db", "select distinct variant from trials order by variant")
    assert [r["variant"] for r in rows] == ["fast", "fast again"]
    bad = invoke("noise", spec, "--variant", "nope", "--db", tmp_path / "n.db")
    assert bad.exit_code == 2 and "variant 'nope' is not in the spec" in bad.output
