"""Figures read the same on every machine: a value computed a few ULPs differently (another BLAS
kernel) is written the same, in text (:mod:`workbench.formatting`'s writers) and in the JSON and CSV
files (:func:`workbench.formatting.meaningful`) — even when it sits exactly on a rounding boundary."""

from __future__ import annotations

import math

import pytest

from workbench.formatting import (
    chart_value,
    fixed,
    fmt,
    meaningful,
    ms,
    num,
    percent,
    plus_minus,
    significant,
    steady,
    times,
)


def neighbours(x: float, ulps: int = 4) -> list[float]:
    """``x`` and the floats up to ``ulps`` units in the last place either side of it."""
    out = [x]
    for direction in (math.inf, -math.inf):
        y = x
        for _ in range(ulps):
            y = math.nextafter(y, direction)
            out.append(y)
    return out


# decimal-exact figures on a boundary of the digits shown: half a token count, a share of small
# counts, a speed-up of two microsecond times, a 6-digit half
@pytest.mark.parametrize(
    ("writer", "value"),
    [
        (lambda v: fmt(v, 0), 262.5),
        (lambda v: fmt(v, 1), 0.25),
        (num, 1.125),
        (ms, 99.95),
        (percent, 0.375),
        (lambda v: percent(v, 1), 0.4125),
        (plus_minus, 0.0625),
        (times, 1.385),
        (lambda v: fixed(v, 2), 0.125),
        (significant, 0.001235),
        (chart_value, 12.25),
        (lambda v: meaningful(v), 1.234565),
        (lambda v: meaningful(v), 262.0005),
    ],
)
def test_a_value_on_a_rounding_boundary_is_written_one_way(writer, value):
    written = {writer(x) for x in neighbours(value)}
    assert len(written) == 1, f"{value} ± 4 ULPs written as {sorted(written)}"


def test_rounding_once_would_flip_them():
    # the fault the two steps prevent: one rounding writes a few ULPs' difference two ways
    assert len({f"{x:.2f}" for x in neighbours(1.385)}) == 2
    assert len({f"{x:.6g}" for x in neighbours(1.234565)}) == 2


def test_meaningful_keeps_six_significant_digits_and_every_other_value():
    data = {"a": 1677.8056755688176, "b": [0.0986480787099523, 2, None, True], "c": "x", "d": 0.0}
    assert meaningful(data) == {"a": 1677.81, "b": [0.0986481, 2, None, True], "c": "x", "d": 0.0}
    assert meaningful(math.inf) == math.inf and math.isnan(meaningful(math.nan))
    assert steady(0.1 + 0.2) == 0.3 and steady(-1e-300) == -1e-300
