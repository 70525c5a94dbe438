"""The GPU check's bundle and models (scripts/gpu_bundle.py, scripts/gpu_models.py; docs/ci.md "The GPU
check"): the bitsandbytes trim keeps a consistent wheel, the completeness check finds what the image
lacks, and the random-weight models have the shapes the docs state. The whole path (bundle, install
with --no-index, the check's CPU fallback) runs in CI as scripts/gpu_dryrun.sh."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bundle = load("gpu_bundle")


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes], requires=()) -> Path:
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {**files, f"{dist}/METADATA": meta.encode(), f"{dist}/WHEEL": b"Wheel-Version: 1.0\n"}

    def digest(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{p},{digest(d)},{len(d)}\n" for p, d in files.items()) + f"{dist}/RECORD,,\n"
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(f"{dist}/RECORD", record)
    return path


def test_bitsandbytes_trim_keeps_cuda13_and_cpu_and_a_matching_record(tmp_path):
    libs = {
        f"bitsandbytes/libbitsandbytes_{k}.so": k.encode() * 100
        for k in ("cpu", "cuda118", "cuda128", "cuda130", "cuda132", "rocm64", "xpu2026")
    }
    wheel = make_wheel(tmp_path, "bitsandbytes", "0.50.2", {"bitsandbytes/__init__.py": b"", **libs})
    before, after = bundle.trim_wheel(wheel, bundle.BNB_KEEP, bundle.BNB_DROP)
    assert after < before
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = zf.read("bitsandbytes-0.50.2.dist-info/RECORD").decode()
    kept = {n.rsplit("_", 1)[1] for n in names if n.endswith(".so")}
    assert kept == {"cpu.so", "cuda130.so", "cuda132.so"}
    assert "cuda128" not in record and "cuda130" in record
    assert bundle.record_ok(wheel)


def test_record_check_catches_a_changed_member(tmp_path):
    wheel = make_wheel(tmp_path, "pkg", "1.0", {"pkg/__init__.py": b"x = 1\n"})
    assert bundle.record_ok(wheel)
    tampered = tmp_path / "t" / wheel.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, b"x = 2\n" if info.filename == "pkg/__init__.py" else src.read(info))
    assert not bundle.record_ok(tampered)


def test_completeness_check_against_the_image(tmp_path):
    make_wheel(
        tmp_path,
        "app",
        "1.0",
        {},
        requires=[
            "transformers>=5.24",
            "sqlite-utils>=4.2",
            "numpy>=1.26",
            'tomli>=2; python_version < "3.11"',
        ],
    )
    make_wheel(tmp_path, "transformers", "5.24.0", {}, requires=["tokenizers<0.24,>=0.23.1", "typer"])
    roots = [Requirement("app==1.0")]
    # sqlite-utils is not in the image and not bundled; transformers is bundled (the image's 5.17 is
    # too old), its tokenizers pin is met by the image's 0.23.2, typer is there (version unknown),
    # tomli's marker is false on the image's 3.12
    assert [str(m) for m in bundle.check_complete(tmp_path, roots)] == [
        "sqlite-utils>=4.2 (wanted by app): image has absent, bundle has none"
    ]
    make_wheel(tmp_path, "sqlite-utils", "4.2.1", {})
    assert bundle.check_complete(tmp_path, roots) == []
    (tmp_path / "transformers-5.24.0-py3-none-any.whl").unlink()
    problems = bundle.check_complete(tmp_path, roots)
    assert [str(m) for m in problems] == [
        "transformers>=5.24 (wanted by app): image has 5.17.0, bundle has none"
    ]
    # a bundled wheel at a version that does not satisfy the requirement is reported with it
    make_wheel(tmp_path, "transformers", "5.20.0", {})
    (problem,) = bundle.check_complete(tmp_path, roots)
    assert problem.bundled == bundle.Version("5.20.0") and problem.image_version == "5.17.0"
    make_wheel(tmp_path, "transformers", "5.24.0", {})
    assert bundle.check_complete(tmp_path, roots) == "two wheels of transformers in the bundle"


def test_a_missing_requirement_is_fetched_at_the_version_the_tests_ran_with():
    import importlib.metadata as md

    here = md.version("packaging")
    assert bundle.wanted(Requirement("packaging>=1")) == f"packaging=={here}"
    # installed here at a version that does not satisfy it: pip picks the newest that does
    assert bundle.wanted(Requirement(f"packaging>{here}")) == f"packaging>{here}"
    assert bundle.wanted(Requirement("no-such-package-here>=2")) == "no-such-package-here>=2"


def test_random_models_have_the_stated_shapes():
    torch = pytest.importorskip("torch")
    from transformers import LlamaForCausalLM

    models = load("gpu_models")
    with torch.device("meta"):
        counts = {
            n: sum(p.numel() for p in LlamaForCausalLM(models.make_config(s)).parameters())
            for n, s in models.SHAPES["full"].items()
        }
    assert 1.05e9 < counts["large"] < 1.09e9  # "1.07 B" (docs/ci.md, the script's docstring)
    assert 134e6 < counts["small"] < 135e6  # SmolLM2-135M's shape


def test_tiny_models_load_with_the_given_tokenizer(tiny_model_dir, tmp_path):
    pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    models = load("gpu_models")
    assert models.main([str(tiny_model_dir), str(tmp_path), "--scale", "tiny", "--device", "cpu"]) == 0
    summary = json.loads((tmp_path / "models.json").read_text())
    assert set(summary) == {"large", "small"}
    for name in ("large", "small"):
        model = AutoModelForCausalLM.from_pretrained(tmp_path / name)
        assert model.config.vocab_size == models.VOCAB
        assert AutoTokenizer.from_pretrained(tmp_path / name)("w1 w2")["input_ids"]
        assert re.search("Random weights", (tmp_path / name / "RANDOM-WEIGHTS.txt").read_text())
