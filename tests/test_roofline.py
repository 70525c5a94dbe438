"""The decode roofline: bandwidth measured and cached per machine, KV bytes per token, limits."""

from __future__ import annotations

import json

import pytest

from workbench.analysis import roofline
from workbench.analysis.run import analyze_run
from workbench.core import shapes
from workbench.run import bandwidth
from workbench.store import Store


def test_kv_bytes_and_the_limit_have_known_values():
    shape = {"layers": 30, "kv_heads": 3, "head_dim": 64, "bytes_per_element": 4}
    assert shapes.kv_bytes_per_token(shape) == 2 * 30 * 3 * 64 * 4
    assert shapes.kv_bytes_per_token(None) is None
    assert shapes.kv_bytes_per_token({"layers": 2}) is None
    # 100 GB/s over 1,000 MiB of weights
    limit = roofline.roofline_tokens_per_s(100, 1000)
    assert limit == pytest.approx(100e9 / (1000 * 2**20))
    # the KV cache read at 1,000 tokens of context lowers it
    with_kv = roofline.roofline_tokens_per_s(100, 1000, kv_bytes_per_token=2**20, context_tokens=1000)
    assert with_kv == pytest.approx(limit / 2)
    assert roofline.roofline_tokens_per_s(None, 1000) is None
    assert roofline.roofline_tokens_per_s(100, 0) is None


def test_cpu_bandwidth_is_measured_and_the_best_figure_is_cached_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv(bandwidth.ENV_OVERRIDE, raising=False)
    first = bandwidth.device_bandwidth("cpu")
    assert 0.1 < first.gbs < 10_000 and not first.cached
    assert "numpy copy" in first.method
    cache = json.loads((tmp_path / "bandwidth.json").read_text())
    (entry,) = cache.values()
    assert entry["gbs"] == first.gbs

    # a busy machine measures less: the cached best stays
    monkeypatch.setattr(bandwidth, "measure_bandwidth", lambda d: bandwidth.Bandwidth(first.gbs / 2, "busy"))
    again = bandwidth.device_bandwidth("cpu")
    assert again.cached and again.gbs == first.gbs
    # a better measurement replaces it
    monkeypatch.setattr(bandwidth, "measure_bandwidth", lambda d: bandwidth.Bandwidth(first.gbs * 2, "idle"))
    better = bandwidth.device_bandwidth("cpu")
    assert not better.cached and better.gbs == first.gbs * 2
    (entry,) = json.loads((tmp_path / "bandwidth.json").read_text()).values()
    assert entry["gbs"] == first.gbs * 2


def test_the_environment_variable_overrides_the_measurement(monkeypatch):
    monkeypatch.setenv(bandwidth.ENV_OVERRIDE, "123.5")
    assert bandwidth.device_bandwidth("cuda:0").gbs == 123.5


def test_an_unwritable_cache_does_not_fail(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("WORKBENCH_CACHE", str(blocker / "sub"))
    monkeypatch.delenv(bandwidth.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(bandwidth, "measure_bandwidth", lambda device: bandwidth.Bandwidth(42.0, "test"))
    assert bandwidth.device_bandwidth("cpu").gbs == 42.0


def test_the_run_records_bandwidth_and_the_analysis_computes_limits(fake_run_db):
    with Store(fake_run_db, create=False) as store:
        variants = {v["name"]: v for v in store.variants(1)}
        analysis = analyze_run(store.load_run(1))
    assert variants["baseline"]["memory_bandwidth_gbs"] == 20.0  # $WORKBENCH_BANDWIDTH_GBS (conftest)
    assert variants["baseline"]["weights_mb"] == 5
    assert analysis.environment["variants"]["int8"]["memory_bandwidth_gbs"] == 20.0
    rows = {(r.variant, r.workload): r for r in analysis.roofline}
    base = rows[("baseline", "code")]
    assert base.limit_tokens_per_s == pytest.approx(20e9 / (5 * 2**20))  # the fake has no KV cache
    assert base.fraction == pytest.approx(base.decode_tokens_per_s / base.limit_tokens_per_s)
    assert rows[("int8", "code")].limit_tokens_per_s == pytest.approx(2 * base.limit_tokens_per_s)


def test_hf_sessions_report_their_kv_cache_size(tiny_model_dir):
    from workbench.core.device import Device
    from workbench.core.registry import get
    from workbench.spec.parse import variant_from_dict

    variant = variant_from_dict(
        {
            "name": "b",
            "model": str(tiny_model_dir),
            "strategy": "baseline",
            "dtype": "float32",
            "device": "cpu",
        }
    )
    session = get("baseline")().load(variant, Device("cpu"))
    # tiny llama: 2 layers, 2 KV heads, head_dim 32 / 4 = 8, float32
    assert session.model_shape == {"layers": 2, "kv_heads": 2, "head_dim": 8, "bytes_per_element": 4}
    assert session.kv_bytes_per_token == 2 * 2 * 2 * 8 * 4
