"""The columns of the comparison tables, each defined once: its key, its short label (the CLI's main
table, ``e2e x``), its long label (the GUI's results table, ``e2e speed-up``), the glossary term that
explains it and the function that writes a row's cell. The CLI's table
(:func:`workbench.report.run_report.main_table`) and the GUI's (:mod:`workbench.gui.results`) take
their cells from here, so a cell reads the same in both. Headless and light (no numpy, no Qt); the
numbers are written by :mod:`workbench.formatting`. The GUI builds its table from these before its
window first shows, so this module imports nothing heavy at import time (the quality and targets
wording, which import the analysis and numpy, are imported when a cell needs them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.core.metrics import METRIC_TABLE
from workbench.formatting import (
    acceptance_text,
    fmt,
    match_text,
    mde_text,
    ms,
    percent,
    ratio,
    trials_text,
)

if TYPE_CHECKING:
    from workbench.analysis.summary import GroupSummary
    from workbench.analysis.targets import Verdict

__all__ = [
    "COLUMNS",
    "Cell",
    "Column",
    "SortValue",
    "prefill_share",
    "targets_cell",
    "targets_text",
]

#: a cell's sort value: a figure, or the words of a words column; None when the cell is empty or has
#: nothing to sort by
SortValue = float | str | None
#: a row's cell: ``summary`` (an ``analysis.summary.GroupSummary``) → (text, sort value)
Cell = Callable[["GroupSummary"], tuple[str, SortValue]]


@dataclass(frozen=True)
class Column:
    """One column of the comparison tables."""

    key: str
    short: str  #: the CLI's header (narrow: ``e2e x``)
    long: str  #: the GUI's header (``e2e speed-up``); the short one where they agree
    glossary: str  #: the term whose explanation is the column's tooltip ("": none)
    #: the row's cell; None where the view fills it from what a summary lacks (``targets``: the
    #: experience targets' verdicts, :func:`targets_cell`)
    cell: Cell | None
    #: the CLI's narrower text, where it leaves something out (a speed-up without its interval); None:
    #: the same text as ``cell``'s
    brief: Callable[[GroupSummary], str] | None = None
    #: its values are words (variant, workload, phase): sorted as text, aligned left
    words: bool = False

    def text(self, summary: GroupSummary, *, brief: bool = False) -> str:
        """The cell's text; ``brief``: the CLI's narrower one where the column has one."""
        if brief and self.brief is not None:
            return self.brief(summary)
        if self.cell is None:
            raise ValueError(f"the column {self.key!r} is filled by its view")
        return self.cell(summary)[0]


# -- the cells ------------------------------------------------------------------------------------


def _metric(name: str, digits: int | None) -> Cell:
    """A median of ``summary.metrics`` at ``digits`` decimals (None: :func:`formatting.ms`'s)."""

    def cell(s: GroupSummary) -> tuple[str, float | None]:
        est = s.metrics.get(name)
        value = est.value if est is not None else None
        return (ms(value) if digits is None else fmt(value, digits), value)

    return cell


def _speedup(attr: str) -> Cell:
    def cell(s: GroupSummary) -> tuple[str, float | None]:
        est = getattr(s, attr)
        return (ratio(est), est.value if est is not None else None)

    return cell


def _speedup_brief(attr: str) -> Callable[[GroupSummary], str]:
    return lambda s: ratio(getattr(s, attr), interval=False)


def _trials(s: GroupSummary) -> tuple[str, float]:
    return (trials_text(s), float(s.n_ok))


def _server(name: str) -> Cell:
    """A served variant's figure from its server's metrics (``summary.server``)."""

    def cell(s: GroupSummary) -> tuple[str, float | None]:
        value = s.server.figure(name) if s.server else None
        return (fmt(value, 1), value)

    return cell


def _throughput(s: GroupSummary) -> tuple[str, float | None]:
    return (fmt(s.throughput_tokens_per_s, 1), s.throughput_tokens_per_s)


def _mde(s: GroupSummary) -> tuple[str, float | None]:
    return (mde_text(s.speedup_e2e), getattr(s.speedup_e2e, "mde", None))


def _match(s: GroupSummary) -> tuple[str, float | None]:
    """The share of identical outputs; ``reference`` for the baseline's own rows."""
    text = match_text(s) or ("reference" if s.speedup_e2e is None and s.n_ok else "")
    return (text, s.matches_baseline)


def _acceptance(s: GroupSummary) -> tuple[str, float | None]:
    """The draft's acceptance, or a served model's own (from its metrics)."""
    rate = s.acceptance_rate
    if rate is None and s.server:
        rate = s.server.acceptance_rate
    return (acceptance_text(s), rate)


def _draft_verify(s: GroupSummary) -> tuple[str, float | None]:
    if s.draft_share is None or s.verify_share is None:
        return ("", None)
    return (f"{percent(s.draft_share)} / {percent(s.verify_share)}", s.draft_share)


def _kld(s: GroupSummary) -> tuple[str, float | None]:
    """KLD from the baseline (sorts lossless and the reference first, unscored last)."""
    from workbench.report.quality import quality_cells

    q = s.quality
    text = quality_cells(s)[0]
    if q is not None and q.figures is not None:
        return (text, q.figures.kld_mean)
    return (text, 0.0 if q is not None and q.status in ("reference", "lossless") else None)


def _same_top(s: GroupSummary) -> tuple[str, float | None]:
    from workbench.report.quality import quality_cells

    q = s.quality
    return (quality_cells(s)[1], q.figures.same_top if q is not None and q.figures is not None else None)


def prefill_share(s: GroupSummary) -> float | None:
    """The row's prefill share: its median TTFT over its median e2e."""
    ttft, e2e = s.metrics["ttft_ms"].value, s.metrics["e2e_ms"].value
    if ttft is None or not e2e:
        return None
    return float(ttft / e2e)


def _prefill_share(s: GroupSummary) -> tuple[str, float | None]:
    share = prefill_share(s)
    return (percent(share), share)


def _phase(s: GroupSummary) -> tuple[str, str]:
    """The row's own phase, from its own prefill share (the same thresholds as the workload's)."""
    from workbench.analysis.phases import classify

    share = prefill_share(s)
    label = classify(share) if share is not None else ""
    return (label, label)


def targets_text(v: Verdict) -> str:
    """A :class:`~workbench.analysis.targets.Verdict` in a table: ``met 2/2 targets · goodput 90 %
    (9/10 requests)``, saying what each count counts."""
    met, n = sum(c.status == "met" for c in v.checks), len(v.checks)
    if v.status == "met":
        head = f"met {met}/{n} targets"
    elif v.status == "missed":
        from workbench.report.targets import metric_names

        head = "missed " + metric_names(v.missed)
    else:
        head = f"met {met}/{n} targets, no data for the rest"
    if v.goodput is None:
        return head
    return f"{head} · goodput {percent(v.goodput)} ({v.good}/{v.requests} requests)"


def targets_cell(verdict: Verdict | None) -> tuple[str, float | None]:
    """The ``targets`` column's cell of a row: its verdict (None: no targets) → (text, goodput)."""
    return (targets_text(verdict), verdict.goodput) if verdict is not None else ("", None)


# -- the columns ----------------------------------------------------------------------------------

#: a measured metric's header: its label and unit, from the metric table (``TTFT ms``)
_HEADER = {key: m.header for key, m in METRIC_TABLE.items()}
#: and its label alone, for the quality pass's figures (a KLD's unit is in the glossary)
_LABEL = {key: m.label for key, m in METRIC_TABLE.items()}

#: every column, by key, in the GUI's order
COLUMNS: dict[str, Column] = {
    c.key: c
    for c in (
        Column("variant", "variant", "variant", "", lambda s: (s.variant, s.variant), words=True),
        Column("workload", "workload", "workload", "", lambda s: (s.workload, s.workload), words=True),
        Column("n", "n", "n", "disturbed", _trials),
        Column(
            "input_tokens", _HEADER["input_tokens"], _HEADER["input_tokens"], "", _metric("input_tokens", 0)
        ),
        Column(
            "output_tokens",
            _HEADER["output_tokens"],
            _HEADER["output_tokens"],
            "",
            _metric("output_tokens", 0),
        ),
        Column("ttft_ms", _HEADER["ttft_ms"], _HEADER["ttft_ms"], "TTFT", _metric("ttft_ms", None)),
        Column("client_ttft_mean_ms", "TTFT mean ms", "TTFT mean ms", "", _server("client_ttft_mean_ms")),
        Column("server_ttft_mean_ms", "srv TTFT mean ms", "srv TTFT mean ms", "", _server("ttft_ms")),
        Column(
            "prefill_tokens_per_s",
            _HEADER["prefill_tokens_per_s"],
            _HEADER["prefill_tokens_per_s"],
            "prefill tok/s",
            _metric("prefill_tokens_per_s", 0),
        ),
        Column("tpot_ms", _HEADER["tpot_ms"], _HEADER["tpot_ms"], "TPOT", _metric("tpot_ms", 2)),
        Column(
            "decode_tokens_per_s",
            "tok/s",
            _HEADER["decode_tokens_per_s"],
            "decode tok/s",
            _metric("decode_tokens_per_s", 1),
        ),
        Column("itl_p50_ms", _HEADER["itl_p50_ms"], _HEADER["itl_p50_ms"], "ITL", _metric("itl_p50_ms", 2)),
        Column("itl_p90_ms", _HEADER["itl_p90_ms"], _HEADER["itl_p90_ms"], "ITL", _metric("itl_p90_ms", 2)),
        Column("e2e_ms", _HEADER["e2e_ms"], _HEADER["e2e_ms"], "e2e", _metric("e2e_ms", 0)),
        Column("concurrency", "conc", "conc", "", lambda s: (str(s.concurrency), s.concurrency)),
        Column("throughput_tokens_per_s", "agg tok/s", "agg tok/s", "", _throughput),
        Column(
            "peak_memory_mb",
            _HEADER["peak_memory_mb"],
            _HEADER["peak_memory_mb"],
            "peak memory",
            _metric("peak_memory_mb", 0),
        ),
        Column("prefill_share", "prefill share", "prefill share", "prefill share", _prefill_share),
        Column("phase", "phase", "phase", "phase", _phase, words=True),
        Column("speedup_e2e", "e2e x", "e2e speed-up", "speed-up", _speedup("speedup_e2e")),
        Column("mde", "MDE", "MDE", "MDE", _mde),
        Column(
            "speedup_ttft",
            "TTFT x",
            "TTFT speed-up",
            "speed-up",
            _speedup("speedup_ttft"),
            brief=_speedup_brief("speedup_ttft"),
        ),
        Column(
            "speedup_decode",
            "decode x",
            "decode speed-up",
            "speed-up",
            _speedup("speedup_decode"),
            brief=_speedup_brief("speedup_decode"),
        ),
        Column("acceptance", "accepted", "accepted", "acceptance", _acceptance),
        Column("draft_verify", "draft/verify", "draft/verify", "", _draft_verify),
        Column("match", "match", "match", "match", _match),
        Column("kld", _LABEL["kld_mean"], _LABEL["kld_mean"], "KLD", _kld),
        Column("same_top", _LABEL["same_top"], _LABEL["same_top"], "same top", _same_top),
        Column("targets", "targets", "targets", "targets", None),
    )
}
