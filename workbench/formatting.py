"""How figures are written in text: every number the CLI, the Markdown/HTML reports, the GUI's table,
the charts' captions and labels and their read-outs show is written by one of these, so a number
reads the same everywhere. Headless and light (no numpy, no Qt, nothing of the workbench): the bottom
layer, beside the core, so that the charts' headless data (below the report) can use it too.

Every one of them rounds in two steps (:func:`steady`, then the digits shown), so a figure computed a
few ULPs differently on another machine (another BLAS kernel) reads the same; :func:`meaningful` rounds
the figures of the JSON and CSV files the same way, to :data:`SIGNIFICANT` significant digits.

Plain numbers: :func:`fmt` (fixed digits), :func:`num` (a readable precision: 1,290 · 77.5 · 0.0484),
:func:`significant` (``0.00375``, ``+0.012``), :func:`ms` (a time in ms at the main table's precision),
:func:`count` and :func:`tokens` (counts), :func:`size` (memory: ``1,234 MB``, ``3.2 GB``),
:func:`duration` (how long something takes: ``48 s``, ``4.2 min``, ``2.10 s``, ``4 min 05 s``).
Ratios: :func:`times` (``1.23x``), :func:`ratio` (a speed-up with its CI). Intervals:
:func:`interval` (a CI after its value, `` [380–450]``, each end written by the figure's own writer;
:func:`ci_suffix` at fixed decimals), :func:`span` (a range, ``1,046–1,246``). Shares:
:func:`percent` (``38%``), :func:`spaced_percent` (``31 %``, ``> 100 %``), :func:`written_percent`,
:func:`plus_minus` (``±6.2%``), :func:`mde_text`. The charts' own: :func:`chart_value` (a value on a bar or in a legend),
:func:`ms_text` (a time with its unit, ``12.3 ms``), :func:`interval_ratio` (a speed-up and its CI in
a read-out), :func:`power_of_ten` (a log axis's tick). A summary's cells: :func:`trials_text` (n with the failed and disturbed
trials), :func:`acceptance_text`, :func:`match_text`; quality: :func:`kld_text`. The columns these fill
are defined once in :mod:`workbench.report.columns`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "acceptance_text",
    "chart_value",
    "ci_suffix",
    "count",
    "duration",
    "environment_lines",
    "fixed",
    "fmt",
    "host_environment",
    "instruction_set",
    "interval",
    "interval_ratio",
    "json_text",
    "kld_text",
    "libraries",
    "machine_line",
    "match_text",
    "mde_text",
    "meaningful",
    "ms",
    "ms_text",
    "num",
    "percent",
    "plus_minus",
    "power_of_ten",
    "ratio",
    "significant",
    "size",
    "spaced_percent",
    "span",
    "steady",
    "times",
    "tokens",
    "trials_text",
    "written_percent",
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


# -- rounding that does not depend on the machine ------------------------------------------------

#: significant digits a figure keeps in the JSON and CSV files: far finer than any measurement here
#: (a bootstrap's own resampling error is ~0.1 %), far coarser than a floating-point kernel's
#: difference (~1e-15)
SIGNIFICANT = 6
#: the first rounding step: values this close (relative ~1e-12) are one value
STEADY_DIGITS = 12


def steady(value: float) -> float:
    """``value`` rounded to :data:`STEADY_DIGITS` significant digits: the first of two roundings.

    A figure computed on another machine can differ in its last bits (a BLAS kernel for AVX-512
    sums in another order than AVX2's). Rounding it once, to the digits shown, flips the shown
    digit when the value sits on a rounding boundary — and decimal-exact figures do, often: half a
    token count (262.5), a share of small counts (3/8), the median of an even number of times
    stored to the microsecond. Rounding first to 12 digits makes a value and its few-ULP neighbours
    one decimal number, which the second rounding then writes one way on every machine. (Values
    that straddle a 12-digit boundary *and* a shown one at once are left: ~1e-9 per value.)"""
    if not math.isfinite(value) or value == 0:
        return value
    return float(f"{value:.{STEADY_DIGITS}g}")


def meaningful(data: Any, digits: int = SIGNIFICANT) -> Any:
    """``data`` (a figure, or dicts and lists of them) with every float rounded to ``digits``
    significant digits, in two steps (:func:`steady`), so the JSON and CSV files read the same on
    every machine; ints, bools, strings and None are left as they are."""
    if isinstance(data, float):
        if not math.isfinite(data) or data == 0:
            return data
        return float(f"{steady(data):.{digits}g}")
    if isinstance(data, dict):
        return {k: meaningful(v, digits) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [meaningful(v, digits) for v in data]
    return data


def _s(value: float) -> float:
    """:func:`steady` of a figure about to be written (ints stay ints)."""
    return value if isinstance(value, int) else steady(value)


def _odd(value: float, unit: str = "", unknown: str = "–") -> str | None:
    """How a figure that is not a finite number reads, the same in every writer: NaN as unknown
    (``unknown``: what the writer writes for None), an infinity ``∞`` / ``−∞`` followed by ``unit``
    (``∞x``); None for a finite figure, which the writer writes itself."""
    if isinstance(value, int) or math.isfinite(value):
        return None
    if math.isnan(value):
        return unknown
    return ("∞" if value > 0 else "−∞") + unit


# -- plain numbers -------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    """``1,234.5``: thousands separated, ``digits`` decimals; ``–`` when unknown."""
    if value is None:
        return "–"
    return _odd(value) or f"{_s(value):,.{digits}f}"


def num(value: float | None, *, whole: bool = True) -> str:
    """A measured number at a readable precision: 1,290 · 77.5 · 0.0484 (no decimals from 100 on, one
    from 10, else three significant digits); a whole number without decimals (``50``, not ``50.0``)
    unless ``whole`` is False; ``–`` when unknown."""
    if value is None:
        return "–"
    if (odd := _odd(value)) is not None:
        return odd
    value = _s(value)
    if abs(value) >= 100 or (whole and float(value).is_integer()):
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def tokens(value: float | None) -> str:
    """A token count, rounded: ``1,024`` (:func:`count`, grouped); ``–`` when unknown."""
    return count(value, grouped=True)


def count(value: float | None, *, grouped: bool = False) -> str:
    """A whole number, rounded: a median count ``48``, a share already in percent ``31``; ``grouped``:
    thousands separated, ``12,000`` trials (an int exactly, however large); ``–`` when unknown."""
    if value is None:
        return "–"
    if (odd := _odd(value)) is not None:
        return odd
    if grouped:
        return f"{round(_s(value)):,}"
    return f"{_s(value):.0f}"


def fixed(value: float, decimals: int) -> str:
    """A ratio, a cost in target steps, a mean length at fixed decimals: ``0.25``, ``3.5``."""
    return _odd(value) or f"{_s(value):.{decimals}f}"


def significant(value: float, digits: int = 3, *, signed: bool = False, grouped: bool = False) -> str:
    """``digits`` significant digits: a KLD ``0.00375``; ``signed``: with its sign, a fitted slope
    ``+0.012``; ``grouped``: thousands separated, a target ``1,500``."""
    return _odd(value) or f"{_s(value):{'+' if signed else ''}{',' if grouped else ''}.{digits}g}"


def ms(value: float | None) -> str:
    """A time in ms as the main table writes it: one decimal under 100 ms, none from 100 ms on."""
    return fmt(value, 1 if _s(value or 0) < 100 else 0)


def ms_text(value: float | None) -> str:
    """A time in ms with its unit, as a chart's read-out writes it: ``12.3 ms``, ``1,234 ms`` from
    100 ms (:func:`ms`); ``–`` when unknown."""
    if value is None:
        return "–"
    return _odd(value, " ms") or f"{ms(value)} ms"


def chart_value(value: float) -> str:
    """A value on a chart's bar or in its legend (ms, s, tok/s): no decimals from 100 (``1,234``), one
    from 10 (``12.3``), else two (``1.23``)."""
    if (odd := _odd(value)) is not None:
        return odd
    value = _s(value)
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def size(mb: float | None, unit: str = "MB") -> str:
    """An amount of memory given in MB (MiB, as measured), in ``unit``: ``1,234 MB`` (no decimals),
    ``GB`` as ``3.2 GB`` (one decimal, 1,024 MB each); ``–`` when unknown."""
    if mb is None or math.isnan(mb):
        return "–"
    if unit == "GB":
        return f"{fmt(mb / 1024, 1)} GB"
    if unit == "MB":
        return f"{fmt(mb, 0)} MB"
    raise ValueError(f"size: unit is MB or GB, got {unit!r}")


def duration(seconds: float | None, decimals: int | None = None, *, clock: bool = False) -> str:
    """How long something takes, given in seconds — every duration the workbench writes.

    As a person says it (the default): ``48 s`` (whole seconds; two significant digits under 10 s:
    ``2.5 s``, ``0.25 s``), from 90 s in minutes, one decimal unless whole or from 100 min (``1.7 min``,
    ``15 min``, ``240 min``).
    ``decimals``: a measured time, always in seconds at that many decimals (``2.10 s``). ``clock``: a
    count-down to the second (an ETA): ``45 s``, ``4 min 05 s``, ``1 h 02 min``. ``–`` when unknown
    (None or NaN); ``∞`` for an endless one."""
    if seconds is None or math.isnan(seconds):
        return "–"
    if math.isinf(seconds):
        return "∞" if seconds > 0 else "−∞"
    value = _s(seconds)
    if decimals is not None:
        return f"{fmt(value, decimals)} s"
    if clock:
        sign, whole = ("-" if value < 0 else ""), round(abs(value))
        if whole < 60:
            return f"{sign}{whole} s"
        minutes, rest = divmod(whole, 60)
        if minutes < 60:
            return f"{sign}{minutes} min {rest:02d} s"
        hours, minutes = divmod(minutes, 60)
        return f"{sign}{hours} h {minutes:02d} min"
    if abs(value) < 10 and not float(value).is_integer():
        return f"{value:.2g} s"
    if abs(value) < 90:
        return f"{value:.0f} s"
    in_minutes = steady(value / 60)
    if in_minutes.is_integer() or abs(in_minutes) >= 100:
        return f"{in_minutes:,.0f} min"
    return f"{in_minutes:.1f} min"


def power_of_ten(exponent: int) -> str:
    """A tick of a log-scale axis: 10 to the ``exponent``, ``1e-3``."""
    return f"1e{exponent}"


# -- ratios and shares ----------------------------------------------------------------------------


def times(value: float | None, digits: int = 2) -> str:
    """A ratio (a speed-up: > 1 is faster) as ``1.23x`` (``digits`` decimals); ``–`` when unknown."""
    if value is None:
        return "–"
    return _odd(value, "x") or f"{_s(value):.{digits}f}x"


def ratio(est: Any, *, interval: bool = True) -> str:
    """A speed-up (an estimate with ``value``, ``lo``, ``hi``) with its CI: ``1.62x [1.40–1.88]``, ``*``
    when the CI excludes 1; without ``interval`` ``1.62x*``; ``""`` when unknown."""
    if est is None or est.value is None:
        return ""
    text = times(est.value)
    if est.lo is not None and est.hi is not None:
        if interval:
            text += ci_suffix(est.lo, est.hi)
        if not est.lo <= 1.0 <= est.hi:
            text += "*"
    return text


def interval_ratio(value: float | None, lo: float | None, hi: float | None) -> str:
    """A speed-up with its interval, as a chart writes it (no mark for significance):
    ``1.62x [1.40–1.85]``, ``1.62x`` without an interval; ``–`` when unknown."""
    return "–" if value is None else times(value) + ci_suffix(lo, hi)


def ci_suffix(lo: float | None, hi: float | None, digits: int = 2, *, grouped: bool = False) -> str:
    """An interval to follow its value, with its leading space: `` [1.40–1.88]`` (``digits`` decimals;
    ``grouped``: thousands separated, `` [1,234.5–1,301.0]``); ``""`` when either end is unknown
    (:func:`interval` with fixed decimals)."""
    if grouped:
        return interval(lo, hi, lambda v: fmt(v, digits))
    return interval(lo, hi, lambda v: fixed(v, digits))


def interval(lo: float | None, hi: float | None, write: Callable[[float], str] | None = None) -> str:
    """An interval (a CI) to follow its value, with its leading space: `` [380–450]``, each end written
    by ``write`` (:func:`num` unless given: a KLD's ``kld_text``, a share's ``percent``). An end that
    is unbounded (infinite: a one-sided interval) is written ``∞`` (``−∞`` below); ``""`` when either end
    is unknown (None or NaN): no interval is shown rather than half of one."""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return ""
    return f" [{_end(lo, write or num)}–{_end(hi, write or num)}]"


def span(lo: float, hi: float, write: Callable[[float], str] | None = None, unit: str = "") -> str:
    """A range of values (the lowest and highest of several, the lengths a line was fitted over):
    ``1,046–1,246``, each end written by ``write`` (:func:`num` unless given) and ``unit`` once after
    both (``1.20–1.80x``); one value when both ends read the same (``38%``); infinite ends ``∞``."""
    first, last = _end(lo, write or num), _end(hi, write or num)
    return f"{first}{unit}" if first == last else f"{first}–{last}{unit}"


def _end(value: float, write: Callable[[float], str]) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return write(value)


def percent(value: float | None, digits: int = 0, *, signed: bool = False) -> str:
    """A share as a percentage: 0.38 → ``38%`` (``signed``: ``+38%``); ``""`` when unknown."""
    if value is None:
        return ""
    if (odd := _odd(value, "%", unknown="")) is not None:
        return odd
    value = _s(value)
    return f"{value:+.{digits}%}" if signed else f"{value:.{digits}%}"


def written_percent(fraction: float) -> str:
    """A share as a person wrote it in a spec (``ci_target = 0.025``): ``2.5%``, ``3%``, ``0.01%``."""
    return _odd(fraction, "%") or f"{significant(fraction * 100, 4)}%"


def spaced_percent(value: float | None) -> str:
    """An acceptance or a break-even share as the drafting tables write it: ``31 %``; ``> 100 %`` for a
    break-even no acceptance can reach; ``–`` when unknown."""
    if value is None or math.isnan(value):
        return "–"
    if value > 1:
        return "> 100 %"
    return f"{max(_s(value), 0.0):.0%}".replace("%", " %")


def plus_minus(value: float | None, digits: int = 1) -> str:
    """A relative half-width: 0.062 → ``±6.2%``; ``""`` when unknown."""
    if value is None:
        return ""
    if (odd := _odd(abs(value), "%", unknown="")) is not None:
        return odd and "±" + odd
    return f"±{_s(value):.{digits}%}"


def mde_text(est: Any) -> str:
    """A speed-up's minimum detectable effect, as ±x %."""
    return plus_minus(getattr(est, "mde", None))


# -- a summary's cells (analysis.summary.GroupSummary) ----------------------------------------------


def trials_text(summary: Any) -> str:
    """The trials a row stands on: ``12``, ``12 (1 failed)``, ``12 (2 disturbed, out)`` (left out of
    the statistics) or ``12 (2 disturbed)`` (kept)."""
    s = summary
    text = f"{s.n_ok}" + (f" ({s.n_failed} failed)" if s.n_failed else "")
    if s.n_disturbed:
        text += f" ({s.n_disturbed} disturbed{', out' if s.disturbed_excluded else ''})"
    return text


def acceptance_text(summary: Any, digits: int = 1) -> str:
    """Draft acceptance rate and mean accepted length (tokens per verification step); a server's own
    speculative decoding (from its metrics) is marked "srv"."""
    rate, length, where = summary.acceptance_rate, summary.mean_accepted_length, ""
    if rate is None and summary.server and summary.server.acceptance_rate is not None:
        rate, length, where = (
            summary.server.acceptance_rate,
            summary.server.mean_accepted_length,
            " srv",
        )
    if rate is None:
        return ""
    text = percent(rate)
    if length is not None:
        text += f" ({_s(length):.{digits}f} tok/step)"
    return text + where


def match_text(summary: Any) -> str:
    """Share of outputs identical to the baseline's, and of tokens when some differ."""
    if summary.matches_baseline is None:
        return ""
    text = percent(summary.matches_baseline)
    if summary.matches_baseline < 1 and summary.match_fraction is not None:
        text += f" ({percent(summary.match_fraction)} tok)"
    return text


def kld_text(value: float | None) -> str:
    """A KLD in nats, three significant digits ("0" only when the predictions are identical)."""
    if value is None:
        return ""
    if (odd := _odd(value, unknown="")) is not None:
        return odd
    return "0" if value == 0 else f"{_s(value):.3g}"


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


def instruction_set(flags: Any) -> str:
    """The CPU's kernel-relevant instruction set in words, from its recorded ``cpu_flags``:
    ``AVX-512 VNNI/BF16 + AMX``, ``AVX2 + AVX-VNNI``, ``AVX2 only``; ``""`` when not recorded."""
    if not isinstance(flags, list):
        return ""
    have = set(flags)
    if "avx512f" in have:
        extras = [name for flag, name in (("avx512_vnni", "VNNI"), ("avx512_bf16", "BF16"),
                                          ("avx512_fp16", "FP16")) if flag in have]  # fmt: skip
        text = "AVX-512" + (" " + "/".join(extras) if extras else "")
        text += " + AVX-VNNI" if "avx_vnni" in have and "avx512_vnni" not in have else ""
    elif "avx2" in have:
        text = "AVX2 + AVX-VNNI" if "avx_vnni" in have else "AVX2"
    elif "asimd" in have or "neon" in have:
        text = "NEON" + (" + SVE" if "sve" in have else "")
    else:
        text = "no AVX2"
    if "amx_tile" in have:
        text += " + AMX"
    return "AVX2 only" if text == "AVX2" else text


def _hardware(host: dict[str, Any]) -> str:
    gpu = (
        f"GPU {host['gpu']} ({host.get('gpu_memory_gb')} GB, driver {host.get('cuda_driver')})"
        if host.get("gpu")
        else "no GPU"
    )
    isa = instruction_set(host.get("cpu_flags"))
    cpu = f"{host.get('cpu')} ×{host.get('cpu_count')}" + (f" ({isa})" if isa else "")
    return f"{cpu}, {host.get('memory_gb')} GB RAM, {gpu}"


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
    if isinstance(host.get("cpu_flags"), list):
        flags = ", ".join(host["cpu_flags"]) or "none of those watched"
        lines.append(f"CPU instruction set: {instruction_set(host['cpu_flags'])} (flags: {flags})")
    gpu = [
        f"{label} {host[key]}{unit}"
        for key, label, unit in (
            ("gpu_capability", "compute capability", ""),
            ("gpu_sm_clock_max_mhz", "SM clock max", " MHz"),
            ("gpu_mem_clock_max_mhz", "memory clock max", " MHz"),
            ("gpu_app_sm_clock_mhz", "application SM clock", " MHz"),
            ("gpu_power_limit_w", "power limit", " W"),
            ("gpu_pci_bus_id", "PCI", ""),
        )
        if host.get(key) is not None
    ]
    if gpu:
        lines.append("GPU: " + ", ".join(gpu))
    if host.get("matmul_precision") is not None:
        on = host.get("tf32_matmul")
        tf32 = "" if on is None else f", TF32 matmuls {'on' if on else 'off'}"
        lines.append(f"float32 matmul precision: {host['matmul_precision']}{tf32}")
    return lines
