"""How figures are written in text: the CLI's tables and the Markdown/HTML reports share these, so a
number reads the same everywhere. Headless and light (no numpy, no Qt)."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "acceptance_text",
    "environment_lines",
    "fmt",
    "host_environment",
    "json_text",
    "libraries",
    "machine_line",
    "match_text",
    "ratio",
    "timing_cells",
]


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as strict JSON: a NaN or an infinity (a ratio over nothing, a limit of ``inf``) is
    written ``null`` (Python's json would write ``NaN``/``Infinity``, which no JSON parser reads);
    values JSON has no type for are written as their text. Every JSON the CLI prints or exports is
    written here."""
    return json.dumps(_finite(data), indent=indent, default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ratio(est: Any) -> str:
    """A speed-up with its CI; ``*`` when the CI excludes 1."""
    if est is None or est.value is None:
        return ""
    text = f"{est.value:.2f}x"
    if est.lo is not None and est.hi is not None:
        text += f" [{est.lo:.2f}–{est.hi:.2f}]"
        if not est.lo <= 1.0 <= est.hi:
            text += "*"
    return text


def mde_text(est: Any) -> str:
    """A speed-up's minimum detectable effect, as ±x %."""
    mde = getattr(est, "mde", None)
    return f"±{mde:.1%}" if mde is not None else ""


def acceptance_text(summary: Any, digits: int = 1) -> str:
    """Draft acceptance rate and mean accepted length (tokens per verification step); a server's own
    speculative decoding (from its metrics) is marked "srv"."""
    rate, length, where = summary.acceptance_rate, summary.mean_accepted_length, ""
    if rate is None and summary.server and summary.server.get("acceptance_rate") is not None:
        rate, length, where = (
            summary.server["acceptance_rate"],
            summary.server["mean_accepted_length"],
            " srv",
        )
    if rate is None:
        return ""
    text = f"{rate:.0%}"
    if length is not None:
        text += f" ({length:.{digits}f} tok/step)"
    return text + where


def match_text(summary: Any) -> str:
    """Share of outputs identical to the baseline's, and of tokens when some differ."""
    if summary.matches_baseline is None:
        return ""
    text = f"{summary.matches_baseline:.0%}"
    if summary.matches_baseline < 1 and summary.match_fraction is not None:
        text += f" ({summary.match_fraction:.0%} tok)"
    return text


def timing_cells(summary: Any, *, served: bool, parallel: bool) -> list[str]:
    """The cells every comparison table starts with: variant, workload, n, token counts, TTFT (and, for
    served variants, the client's and the server's mean TTFT), TPOT, decode tok/s, e2e (and
    concurrency + aggregate tok/s). ``n`` notes disturbed trials ("12, 1 disturbed")."""
    s, m = summary, summary.metrics
    cells = [
        s.variant,
        s.workload,
        f"{s.n_ok}"
        + (f" ({s.n_failed} failed)" if s.n_failed else "")
        + (f" ({s.n_disturbed} disturbed{', out' if s.disturbed_excluded else ''})" if s.n_disturbed else ""),
        fmt(m["input_tokens"].value, 0),
        fmt(m["output_tokens"].value, 0),
        fmt(m["ttft_ms"].value, 1),
    ]
    if served:  # like with like: the client's mean beside the server's mean, over the same requests
        cells.append(fmt(s.server.get("client_ttft_mean_ms") if s.server else None, 1))
        cells.append(fmt(s.server.get("ttft_ms") if s.server else None, 1))
    cells += [fmt(m["tpot_ms"].value, 2), fmt(m["decode_tokens_per_s"].value, 1), fmt(m["e2e_ms"].value, 0)]
    if parallel:
        cells += [str(s.concurrency), fmt(s.throughput_tokens_per_s, 1)]
    return cells


# -- the machine a run was measured on (the run's environment JSON, its "host" part) -----------------


def host_environment(environment: Any) -> dict[str, Any]:
    """The ``host`` part of a run's environment (the JSON text of ``runs.environment`` or its parsed
    dict); ``{}`` when none was recorded."""
    if isinstance(environment, str) or environment is None:
        try:
            environment = json.loads(environment or "{}")
        except ValueError:
            return {}
    host = environment.get("host") if isinstance(environment, dict) else None
    return host if isinstance(host, dict) else {}


def _hardware(host: dict[str, Any]) -> str:
    gpu = (
        f"GPU {host['gpu']} ({host.get('gpu_memory_gb')} GB, driver {host.get('cuda_driver')})"
        if host.get("gpu")
        else "no GPU"
    )
    return f"{host.get('cpu')} ×{host.get('cpu_count')}, {host.get('memory_gb')} GB RAM, {gpu}"


def machine_line(host: dict[str, Any]) -> str:
    """The machine in one line (``show``, the GUI's results header); ``""`` when unknown."""
    if not host:
        return ""
    packages = host.get("packages", {})
    threads = f", {host['torch_threads']} torch threads" if host.get("torch_threads") else ""
    return (
        f"{_hardware(host)}; torch {packages.get('torch')}, transformers {packages.get('transformers')}"
        f"{threads}"
    )


def libraries(packages: Any) -> str:
    """A variant's ``packages`` (JSON) as the versions that matter most: transformers and torch."""
    try:
        versions = json.loads(packages) if isinstance(packages, str) else packages or {}
    except ValueError:
        versions = {}
    found = [f"{name} {versions[name]}" for name in ("transformers", "torch") if name in versions]
    return ", ".join(found) or "-"


def environment_lines(host: dict[str, Any]) -> list[str]:
    """The machine in a few lines (the reports' Environment section)."""
    if not host:
        return ["(no environment recorded)"]
    packages = host.get("packages", {})
    lines = [
        f"CPU {_hardware(host)}",
        f"{host.get('os')}, Python {host.get('python')}",
        "packages: " + ", ".join(f"{k} {v}" for k, v in packages.items()),
    ]
    if host.get("torch_threads"):
        lines.append(f"torch threads: {host['torch_threads']}")
    return lines
