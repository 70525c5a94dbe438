"""One run, two Python environments: a variant in the project's venv and one whose ``python`` is the
second venv that ``scripts/second_venv.sh`` builds (another transformers release), on the tiny model.

Skipped unless ``$WORKBENCH_SECOND_PYTHON`` names that venv's python (CI sets it: docs/ci.md):

    WORKBENCH_SECOND_PYTHON=$(bash scripts/second_venv.sh) .venv/bin/python -m pytest tests/integration/test_second_python.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.cli import cli
from workbench.testing.helpers import db_rows

SECOND = os.environ.get("WORKBENCH_SECOND_PYTHON")

pytestmark = [
    pytest.mark.second_venv,
    pytest.mark.skipif(
        not SECOND, reason="set WORKBENCH_SECOND_PYTHON=$(bash scripts/second_venv.sh) (docs/ci.md)"
    ),
]


def _their_transformers(python: str) -> str:
    out = subprocess.run(
        [python, "-I", "-c", "import importlib.metadata as m; print(m.version('transformers'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_a_variant_in_another_venv_runs_its_own_transformers_beside_ours(tmp_path, tiny_model_dir):
    assert SECOND is not None and Path(SECOND).exists(), f"no interpreter at {SECOND}"
    ours = importlib.metadata.version("transformers")
    theirs = _their_transformers(SECOND)
    assert theirs != ours, f"the second venv has the same transformers ({ours}): nothing to compare"
    spec = tmp_path / "two.toml"
    spec.write_text(
        textwrap.dedent(
            f"""
            name = "two pythons"
            repetitions = 2
            warmup = 1
            [[variants]]
            name = "ours"
            model = "{tiny_model_dir}"
            dtype = "float32"
            threads = 1
            [[variants]]
            name = "theirs"
            model = "{tiny_model_dir}"
            dtype = "float32"
            threads = 1
            python = "{SECOND}"
            [[workloads]]
            name = "w"
            prompts = ["the a of and to in", "w1 w2 w3 w4 w5 w6 w7 w8 w9"]
            max_new_tokens = 12
            ignore_eos = true
            """
        )
    )
    db = tmp_path / "results.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    variants = {v["name"]: v for v in db_rows(db, "select * from variants")}
    assert variants["ours"]["python"] is None and variants["theirs"]["python"] == SECOND
    recorded = {name: json.loads(v["packages"])["transformers"] for name, v in variants.items()}
    assert recorded == {"ours": ours, "theirs": theirs}
    trials = db_rows(
        db,
        "select t.variant, t.output_tokens, t.matches_baseline, t.status, json_extract(v.packages, "
        "'$.transformers') as transformers from trials t join variants v on v.run_id = t.run_id and "
        "v.name = t.variant where t.warmup = 0",
    )
    assert len(trials) == 8 and {t["status"] for t in trials} == {"ok"}
    assert {t["transformers"] for t in trials if t["variant"] == "ours"} == {ours}
    assert {t["transformers"] for t in trials if t["variant"] == "theirs"} == {theirs}
    assert all(t["output_tokens"] == 12 for t in trials)
    # greedy and the same weights: the same tokens, so the older release decoded with its KV cache
    assert [t["matches_baseline"] for t in trials if t["variant"] == "theirs"] == [1, 1, 1, 1]
    env = json.loads(db_rows(db, "select environment from runs")[0]["environment"])
    assert env["host"]["packages"]["transformers"] == ours
    assert env["variants"]["theirs"]["packages"]["transformers"] == theirs
    shown = CliRunner().invoke(cli, ["show", "latest", "--db", str(db)])
    assert f"transformers {theirs}" in shown.output and f"transformers {ours}" in shown.output
