"""``quantized`` with ``method = "gptq"`` (GPTQModel) on the tiny random llama: quantize on load into
the cache, reuse it, load a GPTQ checkpoint as is, and leave nothing half-written when calibration is
interrupted. Without GPTQModel: one clear line (and exit 2 from the CLI preflight)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402
from workbench_strategies import quantized  # noqa: E402
from workbench_strategies.quantized import QuantizedStrategy, quantized_weights_mb  # noqa: E402
from workbench_strategies.quantized import gptq as _gptq  # noqa: E402
from workbench_strategies.quantized.gptq import (  # noqa: E402
    CALIBRATION_MIN_TOKENS,
    CALIBRATION_WORKLOADS,
    calibration_set,
    checkpoint_quantization,
    remove_stale_staging,
)

from workbench.cli import cli  # noqa: E402
from workbench.core.device import Device  # noqa: E402
from workbench.core.errors import SpecError, StrategyError  # noqa: E402
from workbench.core.strategy import Prompt  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.spec.workloads import builtin_workload  # noqa: E402
from workbench.testing.helpers import tiny_prompt, trial_plan  # noqa: E402

CPU = Device("cpu")
HAS_GPTQMODEL = _gptq.gptq_unavailable_reason() is None
needs_gptqmodel = pytest.mark.skipif(not HAS_GPTQMODEL, reason="GPTQModel not installed (make gptq)")

# the tiny model's layers are 32 and 64 wide: groups of 32 fit all; 4 samples keep calibration short
GPTQ = {"method": "gptq", "group_size": 32, "calibration_samples": 4}


def spec_text(model_dir, dtype="float32", **params) -> str:
    keys = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in params.items())
    return (
        f'name = "gptq"\nrepetitions = 1\nwarmup = 0\n[[variants]]\nname = "q"\nmodel = "{model_dir}"\n'
        f'strategy = "quantized"\ndtype = "{dtype}"\ndevice = "cpu"\n{keys}'
        '[[workloads]]\nname = "code"\nlimit = 2\nmax_new_tokens = 5\n'
    )


def variant(model_dir, dtype="float32", **params):
    return parse_spec(spec_text(model_dir, dtype, **params)).variants[0]


def generate(session, max_new_tokens=7):
    plan = trial_plan(Prompt(id="raw", prompt=tiny_prompt(10)), max_new_tokens, ignore_eos=True)
    result = TrialRunner(session, CPU).run(plan)
    assert result.status == "ok", result.record.error
    return result


def entries(cache: Path) -> list[Path]:
    root = cache / "gptq"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@pytest.fixture
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


# --- calibration set (no GPTQModel needed) ----------------------------------------------------------


def test_calibration_is_deterministic_round_robin_windows_of_the_builtin_workloads(tiny_tokenizer):
    everything = calibration_set(tiny_tokenizer, 10_000, window=64)
    assert everything == calibration_set(tiny_tokenizer, 10_000, window=64)  # deterministic
    assert len({tuple(ids) for ids in everything}) == len(everything)  # no window twice
    assert all(CALIBRATION_MIN_TOKENS <= len(ids) <= 64 for ids in everything)
    # the first windows come one per workload, in CALIBRATION_WORKLOADS order
    first = calibration_set(tiny_tokenizer, len(CALIBRATION_WORKLOADS), window=64)
    assert first == everything[: len(CALIBRATION_WORKLOADS)]
    for ids, name in zip(first, CALIBRATION_WORKLOADS, strict=True):
        prompt = builtin_workload(name).items[0].prompt
        assert ids == _gptq._token_ids(tiny_tokenizer, prompt)[:64]
    assert calibration_set(tiny_tokenizer, 3, window=64) == everything[:3]


def test_the_cache_key_changes_with_every_input(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    base = dict(
        identity="dir:/m|config.json|1|2",
        model_ref="/m",
        bits=4,
        group_size=64,
        calibration=[[1, 2, 3]],
        calibration_dtype="float32",
        device_type="cpu",
        gptqmodel_version="7.7.0",
    )
    entry = _gptq.cache_entry(**base)
    assert entry.path.parent == tmp_path / "gptq"
    assert entry.path.name.startswith("m-4b-g64-")
    assert _gptq.cache_entry(**base).path == entry.path
    for change in [
        {"identity": "dir:/m|config.json|1|3"},
        {"bits": 8},
        {"group_size": 128},
        {"calibration": [[1, 2, 4]]},
        {"calibration_dtype": "bfloat16"},
        {"device_type": "cuda"},
        {"gptqmodel_version": "7.8.0"},
    ]:
        assert _gptq.cache_entry(**{**base, **change}).key != entry.key, change


# --- bad input --------------------------------------------------------------------------------------


@pytest.fixture
def no_gptqmodel(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        quantized.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gptqmodel" else real(name, *a),
    )


def test_without_gptqmodel_the_variant_fails_preflight_naming_what_to_install(tiny_model_dir, no_gptqmodel):
    v = variant(tiny_model_dir, **GPTQ)
    with pytest.raises(StrategyError) as info:
        QuantizedStrategy().preflight(v)
    reason = str(info.value)
    assert reason.startswith("method 'gptq' is not available here: GPTQModel is not installed")
    assert "make gptq" in reason and "--no-deps" in reason and "gptqmodel==7.7.0" in reason
    assert "\n" not in reason
    QuantizedStrategy().preflight(variant(tiny_model_dir, method="auto"))  # auto never picks gptq
    with pytest.raises(
        StrategyError, match=r"^method 'gptq' is not available here: GPTQModel is not installed"
    ):
        QuantizedStrategy().load(v, CPU)


def test_without_gptqmodel_the_cli_exits_2_with_one_line(tiny_model_dir, tmp_path, no_gptqmodel):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(tiny_model_dir, **GPTQ), encoding="utf-8")
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("Error: variant 'q': method 'gptq' is not available here: ")
    assert "GPTQModel is not installed" in lines[0]
    assert not db.exists()


def test_a_missing_import_of_gptqmodel_is_named(monkeypatch):
    real = importlib.util.find_spec
    # everything GPTQModel imports is there (whatever this environment has installed) except pypcre
    monkeypatch.setattr(
        quantized.importlib.util,
        "find_spec",
        lambda name, *a: (
            None if name == "pcre" else real("json") if name in _gptq.GPTQ_REQUIREMENTS else real(name, *a)
        ),
    )
    reason = _gptq.gptq_unavailable_reason()
    assert (
        reason
        == "GPTQModel is installed without what it imports: pypcre==0.6.4 (pip install --no-deps 'pypcre==0.6.4')"
    )


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"bits": 3}, "'bits'"), ({"bits": 16}, "'bits'"), ({"group_size": 48}, "'group_size'")],
)
def test_spec_rejects_bad_bits_and_group_size(tiny_model_dir, params, needle):
    with pytest.raises(SpecError, match=needle):
        variant(tiny_model_dir, **{**GPTQ, **params})


def test_spec_rejects_no_calibration_samples(tiny_model_dir):
    with pytest.raises(SpecError, match="calibration_samples must be at least 1"):
        variant(tiny_model_dir, **{**GPTQ, "calibration_samples": 0})


def test_a_checkpoint_quantized_another_way_is_refused(tiny_model_dir, tmp_path):
    if not HAS_GPTQMODEL:
        pytest.skip("GPTQModel not installed (make gptq)")
    folder = tmp_path / "bnb"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(StrategyError, match=r"already quantized with 'bitsandbytes'$"):
        QuantizedStrategy().load(variant(folder, **GPTQ), CPU)


@needs_gptqmodel
def test_8_bits_at_float32_fails_before_any_calibration(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    with pytest.raises(StrategyError) as info:
        QuantizedStrategy().load(variant(tiny_model_dir, **{**GPTQ, "bits": 8}), CPU)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("method 'gptq' with bits = 8 cannot run here at dtype float32 on cpu")
    assert 'dtype = "bfloat16"' in message
    assert entries(tmp_path) == []  # refused before calibration


# --- quantize on load, cache, reuse -----------------------------------------------------------------


@pytest.fixture(scope="module")
def gptq_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("gptq-cache")


@pytest.fixture(scope="module")
def first_load(tiny_model_dir, gptq_cache):
    """One quantize-on-load of the tiny model into a fresh cache (shared by the tests below)."""
    if not HAS_GPTQMODEL:
        pytest.skip("GPTQModel not installed (make gptq)")
    cwd = gptq_cache / "cwd"
    cwd.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_CACHE", str(gptq_cache))
        mp.chdir(cwd)
        session = QuantizedStrategy().load(variant(tiny_model_dir, **GPTQ), CPU)
    assert list(cwd.iterdir()) == []  # GPTQModel's ./logs went into the checkpoint, not here
    yield session
    session.close()


@needs_gptqmodel
def test_quantize_on_load_writes_one_complete_cache_entry(first_load, gptq_cache, float32_mb):
    session = first_load
    assert session.method == "gptq"
    assert session.quantize_s is not None and session.quantize_s > 0
    assert session.quantized_layers == 14  # 2 layers x (q, k, v, o, gate, up, down); lm_head stays float
    assert session.kernels  # e.g. ("TorchFusedLinear",) for float32 on CPU
    [entry] = entries(gptq_cache)
    assert Path(session.checkpoint) == entry
    assert list((entry / "gptqmodel-logs").glob("*.log"))
    manifest = json.loads((entry / "workbench-gptq.json").read_text())
    assert manifest["bits"] == 4 and manifest["group_size"] == 32
    assert manifest["calibration_samples"] == 4 and manifest["gptqmodel"] == "7.7.0"
    assert manifest["quantize_s"] > 0
    assert checkpoint_quantization(entry)["quant_method"] == "gptq"
    assert 0 < session.weights_mb < float32_mb
    assert session.weights_mb == pytest.approx(quantized_weights_mb(session.hf.model))
    result = generate(session)
    assert result.record.output_tokens == 7


@needs_gptqmodel
def test_the_second_load_reuses_the_cache_and_generates_the_same_tokens(
    first_load, tiny_model_dir, gptq_cache, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_CACHE", str(gptq_cache))
    again = QuantizedStrategy().load(variant(tiny_model_dir, **GPTQ), CPU)
    assert again.quantize_s is None  # no calibration this time
    assert again.checkpoint == first_load.checkpoint
    assert len(entries(gptq_cache)) == 1
    assert generate(again).record.output_text == generate(first_load).record.output_text
    again.close()


@needs_gptqmodel
def test_a_gptq_checkpoint_is_loaded_as_it_is(first_load, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "empty-cache"))
    checkpoint = Path(first_load.checkpoint)
    # bits / group_size of the spec do not apply: the checkpoint brings its own
    session = QuantizedStrategy().load(variant(checkpoint, method="gptq", group_size=128), CPU)
    assert session.quantize_s is None
    assert Path(session.checkpoint) == checkpoint
    assert session.quantized_layers == 14
    assert not (tmp_path / "empty-cache" / "gptq").exists()  # nothing quantized, nothing cached
    assert generate(session).record.output_text == generate(first_load).record.output_text
    session.close()


# --- interrupted calibration ------------------------------------------------------------------------


@needs_gptqmodel
def test_an_exception_during_calibration_leaves_nothing_in_the_cache(tiny_model_dir, tmp_path, monkeypatch):
    from gptqmodel.models.base import BaseQModel

    real_save = BaseQModel.save
    saved = []

    def save_then_interrupt(self, path, *args, **kwargs):
        real_save(self, path, *args, **kwargs)  # the checkpoint is fully written in the staging folder...
        saved.append(Path(path))
        raise KeyboardInterrupt  # ... when Ctrl-C arrives

    monkeypatch.setattr(BaseQModel, "save", save_then_interrupt)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        QuantizedStrategy().load(variant(tiny_model_dir, **GPTQ), CPU)
    assert saved and ".staging-" in saved[0].name
    assert not saved[0].exists()
    assert entries(tmp_path) == []  # neither an entry nor the staging folder


@needs_gptqmodel
@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_a_run_killed_during_calibration_leaves_no_cache_entry(tiny_model_dir, tmp_path):
    """Ctrl-C twice on `workbench run` kills the worker in the middle of GPTQ calibration."""
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(tiny_model_dir, **GPTQ), encoding="utf-8")
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "run", str(spec), "--db", str(tmp_path / "r.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WORKBENCH_CACHE": str(cache)},
    )
    deadline = time.monotonic() + 120
    while not entries(cache) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if not entries(cache):
        proc.kill()
        pytest.fail(f"calibration never started: {proc.communicate()[1][-2000:]}")
    [staging] = entries(cache)
    assert ".staging-" in staging.name  # calibration is under way
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # asked twice: the worker is killed at once
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    left = entries(cache)
    assert all(".staging-" in p.name for p in left)  # no entry, complete or not
    assert not any((p / "workbench-gptq.json").exists() for p in left)
    remove_stale_staging(cache / "gptq")  # what the next quantization does first
    assert entries(cache) == []


# --- through the real worker: calibration is load time, not trial time ------------------------------


@needs_gptqmodel
def test_workbench_run_records_calibration_in_load_ms_not_in_trials(tiny_model_dir, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(tiny_model_dir, **GPTQ), encoding="utf-8")
    db = tmp_path / "r.db"
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "run", str(spec), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WORKBENCH_CACHE": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    [entry] = entries(cache)
    quantize_ms = json.loads((entry / "workbench-gptq.json").read_text())["quantize_s"] * 1000
    with sqlite3.connect(db) as conn:
        load_ms, weights_mb = conn.execute("select load_ms, weights_mb from variants").fetchone()
        trials = conn.execute("select status, e2e_ms from trials").fetchall()
    assert load_ms >= quantize_ms
    assert weights_mb > 0
    assert [s for s, _ in trials] == ["ok", "ok"]
    assert all(e2e < quantize_ms for _, e2e in trials)


def test_the_makefile_installs_what_the_strategy_asks_for():
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text(encoding="utf-8")
    start = makefile.index("GPTQ_PACKAGES :=")
    text = makefile[start : makefile.index("\n\n", start)].replace("\\\n", " ")
    packages = text.split(":=", 1)[1].split()
    assert [p.strip("'") for p in packages] == list(_gptq.GPTQ_REQUIREMENTS.values())


@needs_gptqmodel
def test_a_gptq_checkpoint_from_the_hugging_face_cache_loads_offline(first_load, tmp_path, monkeypatch):
    """A hub id whose snapshot is a GPTQ checkpoint (laid out as huggingface_hub caches it)."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-gptq"
    shutil.copytree(first_load.checkpoint, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # "someone/tiny-gptq" is no local folder here
    session = QuantizedStrategy().load(variant("someone/tiny-gptq", **GPTQ), CPU)
    assert Path(session.checkpoint).name == commit
    assert session.quantize_s is None and session.quantized_layers == 14
    assert generate(session).record.output_text == generate(first_load).record.output_text
    session.close()
