"""The charts' own number formats: the values written on the charts and in their hover read-outs.

The one set every chart kind uses (the texts they produce are part of what the charts show, so each
format is kept as it is); the rest of the program's numbers are worded by
:mod:`workbench.report.formatting`.
"""

from __future__ import annotations

__all__ = ["milliseconds", "number", "ratio"]


def number(value: float) -> str:
    """A value on a bar or in a legend (ms, s, tok/s): no decimals from 100, one from 10, else two."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def milliseconds(value: float | None) -> str:
    """A time in a read-out: ``12.3 ms``, ``1,234 ms`` from 100 ms; ``–`` for none."""
    return "–" if value is None else f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def ratio(value: float | None, lo: float | None, hi: float | None) -> str:
    """A speed-up with its interval in a read-out: ``1.62x [1.40–1.85]``; ``–`` for none."""
    if value is None:
        return "–"
    ci = f" [{lo:.2f}–{hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{value:.2f}x{ci}"
