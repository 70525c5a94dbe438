"""What each chart shows — series, labels, units — as plain data, without Qt: the base classes and the
colours every chart kind (one module each in this package) shares.

The chart module (:mod:`workbench.gui.charts`) draws these objects with pyqtgraph, each by its chart
kind (:mod:`workbench.gui.chartkinds`), for the GUI and for headless export alike, so the GUI never
draws a chart differently from an exported file. Keeping the shaping here means the CSV of every
chart and the tests of its numbers need no Qt, and the viewer-only install (no ``gui`` extra) can
still export the data behind each chart.

Every chart has a ``key`` (the file stem on export), a ``title``, the ``variants`` it shows (in run
order, which fixes their colours) and ``rows()``: its data in long format, one dict per plotted value,
which is exactly what its CSV holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from workbench.analysis.summary import GroupSummary
    from workbench.analysis.targets import Verdict
    from workbench.store import VariantRecord

__all__ = [
    "OKABE_ITO",
    "Axis",
    "Chart",
    "Row",
    "RunView",
    "Scalar",
    "file_stem",
    "lighten",
    "untagged",
    "variant_colours",
]

#: Okabe & Ito's colour-blind-safe palette, ordered for white backgrounds: blue first (the baseline
#: usually runs first), yellow late (weak on white), black last.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)


#: one value of a chart's data: a cell of its CSV
Scalar = str | int | float | bool | None
#: one row of a chart's data, column → value, in the CSV's column order
Row = dict[str, Scalar]


#: the run tag two runs side by side put before a variant's name (``"3:baseline"``)
_RUN_TAG = re.compile(r"^\d+:")


def untagged(name: str) -> str:
    """A variant's name without the ``RUN:`` tag of two runs side by side: ``"3:int8"`` → ``"int8"``."""
    return _RUN_TAG.sub("", name, count=1)


def variant_colours(variants: Iterable[str]) -> dict[str, str]:
    """One colour per variant, by position in run order: the same variant gets the same colour in
    every chart of a run (and in the report's tables). Keyed on the name without its ``RUN:`` tag, so
    with two runs side by side ``1:int8``, ``2:int8`` and ``int8`` (the before → after chart) share
    one colour. Past eight variants the palette repeats."""
    names = list(dict.fromkeys(variants))  # an iterator is read once
    order = list(dict.fromkeys(untagged(v) for v in names))
    return {name: OKABE_ITO[order.index(untagged(name)) % len(OKABE_ITO)] for name in names}


def lighten(colour: str, amount: float = 0.55) -> str:
    """``colour`` (``#rrggbb``) mixed with white: the prefill shade of a variant's colour."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass(frozen=True)
class Axis:
    label: str
    unit: str = ""

    @property
    def text(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


@dataclass
class Chart:
    """Base of every chart's data. Subclasses set ``key`` and implement ``rows``."""

    key: ClassVar[str] = ""
    title: str = ""
    variants: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # caption lines under the chart

    def rows(self) -> Sequence[Mapping[str, object]]:
        """One row per plotted value (:data:`Row`, or a chart's own TypedDict of :data:`Scalar`)."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        """File stem on export (``headline``, ``timeline-chat``...)."""
        return self.key

    @property
    def colours(self) -> dict[str, str]:
        return variant_colours(self.variants)


class RunView(Protocol):
    """What the memory and targets charts read of a run: a
    :class:`~workbench.analysis.run.RunAnalysis`, or runs side by side
    (:class:`~workbench.analysis.compare.SideBySide`, variants tagged ``RUN:name``)."""

    @property
    def variants(self) -> Sequence[VariantRecord]: ...  # names tagged RUN:name side by side

    @property
    def variant_names(self) -> Sequence[str]: ...  # run order

    @property
    def summaries(self) -> Sequence[GroupSummary]: ...

    @property
    def verdicts(self) -> Sequence[Verdict]: ...  # the experience targets' verdicts


def file_stem(text: str) -> str:
    """``text`` as part of a chart's file name: runs of other characters than letters, digits, ``_.-``
    become ``-`` (``"sweep input"`` → ``"sweep-input"``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"
