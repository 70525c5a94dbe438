"""Charts: the data behind each (headless) and its drawing (offscreen Qt), checked by pixels."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from workbench import charts as cd
from workbench.analysis.summary import summarize
from workbench.charts import run_charts
from workbench.store import Store

pytest.importorskip("pyqtgraph")
from PySide6 import QtGui, QtSvg, QtWidgets

from workbench.gui import charts


def headline(bars: dict[str, tuple[float, float]], workload: str = "w") -> cd.HeadlineChart:
    return cd.HeadlineChart(
        title="t",
        variants=tuple(bars),
        groups=(cd.HeadlineGroup(workload, tuple(cd.HeadlineBar(v, p, d, 3) for v, (p, d) in bars.items())),),
    )


def image(data: bytes) -> QtGui.QImage:
    img = QtGui.QImage()
    assert img.loadFromData(data, "PNG")
    return img.convertToFormat(QtGui.QImage.Format.Format_RGB32)


def rightmost(img: QtGui.QImage, colour: str) -> int:
    """The largest x of a pixel of exactly ``colour`` (bar fills are flat colours)."""
    target = QtGui.QColor(colour).rgb()
    best = -1
    for y in range(0, img.height(), 2):
        for x in range(img.width() - 1, best, -1):
            if img.pixel(x, y) == target:
                best = x
                break
    return best


def test_colours_are_okabe_ito_by_run_order_and_stable():
    colours = cd.variant_colours(["baseline", "int8", "spec"])
    assert colours == {"baseline": "#0072B2", "int8": "#E69F00", "spec": "#009E73"}
    assert cd.variant_colours(["baseline", "int8"])["int8"] == colours["int8"]
    assert len(set(cd.variant_colours(f"v{i}" for i in range(8)).values())) == 8
    assert cd.lighten("#000000", 0.5) == "#808080"


def test_headline_data_from_a_recorded_run(fake_run_db):
    with Store(fake_run_db, create=False) as store:
        summaries = summarize(
            store.trials(1), "baseline", variant_order=[v["name"] for v in store.variants(1)]
        )
    chart = cd.headline_chart(summaries, {"rag": "prefill-heavy"})
    assert chart.variants == ("baseline", "int8", "spec")
    rag = chart.groups[0]
    assert rag.workload == "rag" and rag.label == "prefill-heavy"
    by_variant = {b.variant: b for b in rag.bars}
    for s in summaries:
        if s.workload == "rag":
            bar = by_variant[s.variant]
            # a bar is the table's median e2e, split at the median TTFT
            assert bar.prefill_ms == s.metrics["ttft_ms"].value
            assert bar.total_ms == pytest.approx(s.metrics["e2e_ms"].value)
    # int8's prefill costs more per input token, its decode less (injected costs)
    assert by_variant["int8"].prefill_ms > by_variant["baseline"].prefill_ms
    code = {b.variant: b for b in chart.groups[1].bars}
    assert code["int8"].total_ms < code["baseline"].total_ms
    rows = chart.rows()
    assert {"workload", "variant", "prefill_ms", "decode_ms", "total_ms", "prefill_share"} <= set(rows[0])


def test_headline_renders_bars_in_the_order_of_their_lengths(qapp):
    chart = headline({"a": (10, 90), "b": (40, 20), "c": (5, 200)})
    img = image(charts.png_bytes(chart, scale=1.0))
    assert (img.width(), img.height()) == charts.preferred_size(chart)
    ends = {v: rightmost(img, c) for v, c in chart.colours.items()}  # decode segments: full colour
    assert min(ends.values()) > 0, ends
    assert ends["b"] < ends["a"] < ends["c"]
    starts_of_decode = {v: rightmost(img, cd.lighten(c)) for v, c in chart.colours.items()}
    assert starts_of_decode["c"] < starts_of_decode["a"] < starts_of_decode["b"]  # prefill 5 < 10 < 40


def test_png_is_2x_by_default(qapp):
    chart = headline({"a": (10, 90)})
    img = image(charts.png_bytes(chart))
    w, h = charts.preferred_size(chart)
    assert (img.width(), img.height()) == (2 * w, 2 * h)


def test_svg_parses_and_renders_like_the_png(qapp):
    chart = headline({"a": (10, 90), "b": (40, 20)})
    svg = charts.svg_bytes(chart)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    w, h = charts.preferred_size(chart)
    assert root.get("viewBox") == f"0 0 {w} {h}"
    renderer = QtSvg.QSvgRenderer(svg)
    assert renderer.isValid()
    drawn = QtGui.QImage(w, h, QtGui.QImage.Format.Format_RGB32)
    drawn.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(drawn)
    renderer.render(painter)
    painter.end()
    png = image(charts.png_bytes(chart, scale=1.0))
    # the bars end at the same place in both renderings (pyqtgraph's own SVG exporter misplaces them)
    for colour in chart.colours.values():
        assert abs(rightmost(drawn, colour) - rightmost(png, colour)) <= 2
    diff = sum(
        abs(QtGui.QColor(drawn.pixel(x, y)).lightness() - QtGui.QColor(png.pixel(x, y)).lightness())
        for y in range(0, h, 3)
        for x in range(0, w, 3)
    ) / ((h // 3 + 1) * (w // 3 + 1))
    assert diff < 6, diff


def test_build_and_fill_a_widget_for_the_gui(qtbot):
    widget = charts.build(headline({"a": (10, 90)}))
    qtbot.addWidget(widget)
    assert len(charts.plot_items(widget)) == 1
    charts.fill(widget, headline({"a": (1, 2), "b": (3, 4)}))
    plots = charts.plot_items(widget)
    assert len(plots) == 1
    ticks = plots[0].getAxis("left")._tickLevels[0]
    assert [t[1] for t in ticks] == ["a", "b"]
    with pytest.raises(TypeError):
        charts.fill(widget, cd.Chart())


def test_every_chart_kind_has_one_renderer_and_a_tab_of_the_window():
    """The one list of chart kinds (workbench.charts.registry): every chart class of workbench/charts/
    is a kind of it, every kind has exactly one GUI renderer and every renderer a kind of the list; the
    window's tabs, their keys and the --tab names are the list's."""
    from workbench.charts.registry import chart_kinds, chart_tabs
    from workbench.gui import tab_names
    from workbench.gui.chartkinds import CHART_KINDS, kind_of, unmatched_kinds
    from workbench.gui.chartview import CHART_TABS

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    data = {c for c in subclasses(cd.Chart) if c.__module__.startswith("workbench.charts.")}
    assert len(data) >= 13
    assert sorted(s.data.__name__ for s in chart_kinds()) == sorted(c.__name__ for c in data)
    assert unmatched_kinds() == ([], [])
    assert sorted(k.kind for k in CHART_KINDS) == sorted(s.kind for s in chart_kinds())
    assert kind_of(cd.Chart()) is None and kind_of(headline({"a": (1, 2)})) is CHART_KINDS[0]
    # the tabs' keys come from the list, in the report's order (a kind added later may join a tab)
    expected = [
        ("Headline", ("headline",)),
        ("Timeline", ("timeline",)),
        ("Sweeps", ("sweep", "parameter-sweep")),
        ("Conversation", ("conversation",)),
        ("Speed-up", ("speedup", "before-after")),
        ("Quality", ("quality",)),
        ("Acceptance", ("draft-positions", "accepted-length")),
        ("Memory", ("memory", "roofline")),
        ("Targets", ("targets",)),
    ]
    tabs = {title: keys for title, keys, _ in CHART_TABS}
    assert [title for title, _, _ in CHART_TABS if title in dict(expected)] == [t for t, _ in expected]
    for title, keys in expected:
        assert [k for k in tabs[title] if k in keys] == list(keys), title
    assert {k for keys in tabs.values() for k in keys} == {s.kind for s in chart_kinds()}
    names = tab_names()
    assert names[:4] == ("experiment", "results", "history", "log")
    assert names[4:] == tuple(t.name for t in chart_tabs())
    assert {"headline", "sweeps", "conversation", "speedup", "acceptance", "targets"} <= set(names)


def test_a_kind_in_one_layer_only_is_found(monkeypatch):
    """The check above catches a headless kind without a renderer, a renderer of a kind the list lacks,
    and a second renderer or entry for one kind."""
    from workbench.charts import registry
    from workbench.gui.chartkinds import base as kb
    from workbench.gui.chartkinds import unmatched_kinds

    class Lonely(cd.Chart):
        key = "lonely"

    class Orphan(cd.Chart):
        key = "orphan"

    tab = registry.chart_tabs()[0]
    monkeypatch.setitem(registry._KINDS, "lonely", registry.ChartSpec(Lonely, tab, 999, run=lambda a: None))
    assert unmatched_kinds() == (["lonely"], [])

    class OrphanKind(kb.ChartKind[Orphan]):
        data = Orphan

        def build(self, widget: Any, chart: Orphan) -> None:
            pass

    monkeypatch.setitem(kb.RENDERERS, "orphan", OrphanKind())
    assert unmatched_kinds() == (["lonely"], ["orphan"])

    class SecondHeadline(OrphanKind):
        data = cd.HeadlineChart

    with pytest.raises(ValueError, match="two renderers"):
        kb.renderer(SecondHeadline)

    class OtherHeadline(cd.Chart):
        key = "headline"

    with pytest.raises(ValueError, match="registered twice"):
        registry.register_chart(registry.ChartSpec(OtherHeadline, tab, 1, run=lambda a: None))
    with pytest.raises(ValueError, match="no view"):
        registry.register_chart(registry.ChartSpec(Orphan, tab, 1))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal from Python 3.12 on")
def test_the_qt_binding_does_not_drop_references_to_none(qapp):
    """PySide6 6.12.0 drops a reference to None on every call that returns None; on Python 3.11 a few
    charts then kill the process (the reason for the version bound in pyproject's gui extra)."""
    item = QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
    pen = QtGui.QPen()
    before = sys.getrefcount(None)
    for _ in range(2000):
        item.parentItem()
        item.setPen(pen)
    assert abs(sys.getrefcount(None) - before) < 200


def test_every_chart_of_a_run_has_known_data_and_draws(fake_run_db, qapp):
    from workbench.analysis.run import analyze_run

    with Store(fake_run_db, create=False) as store:
        analysis = analyze_run(store.load_run(1))
    charts_by_name = {c.name: c for c in run_charts(analysis)}
    ttft = charts_by_name["ttft-vs-input"]
    assert ttft.source == "sweep-input"
    slopes = {s.variant: s.slope for s in ttft.series}
    assert slopes["baseline"] == pytest.approx(0.2, rel=0.2)  # injected: 0.2 ms per input token
    assert slopes["int8"] == pytest.approx(0.3, rel=0.2)
    assert ttft.series[0].x == (64.0, 128.0, 256.0)  # limit = 3 sweep points
    decode = charts_by_name["decode-vs-output"]
    assert decode.source == "sweep-output" and decode.y_axis.unit == "tok/s"
    accepted = charts_by_name["accepted-length"]
    spec_summary = next(s for s in analysis.summaries if s.variant == "spec" and s.workload == "code")
    assert accepted.mean_length("spec") == pytest.approx(
        sum(k * n for k, n in accepted.counts["spec"].items()) / sum(accepted.counts["spec"].values())
    )
    assert 2.5 < accepted.mean_length("spec") <= 3 and spec_summary.mean_accepted_length > 2.5
    memory = charts_by_name["memory"]
    assert [b.weights_mb for b in memory.bars] == [5, 2.5, 6]
    for chart in run_charts(analysis):
        img = image(charts.png_bytes(chart, scale=1.0))
        white = QtGui.QColor("white").rgb()
        inked = sum(
            img.pixel(x, y) != white for y in range(0, img.height(), 4) for x in range(0, img.width(), 4)
        )
        assert inked > 200, chart.name
        drawn = {v for v in chart.variants if rightmost(img, chart.colours[v]) >= 0}
        assert drawn, chart.name
        if isinstance(chart, cd.MemoryChart | cd.RooflineChart | cd.HeadlineChart):
            assert drawn == set(chart.variants), (chart.name, drawn)  # every bar is inside the view


def test_headline_bars_are_the_tables_e2e_medians_and_rank_as_it_does():
    """The sum of the two phases' medians is not the median e2e, and can rank two close variants the
    other way round: the bar is the median e2e, split at the median TTFT."""
    from workbench.analysis.stats import Estimate
    from workbench.analysis.summary import GroupSummary

    def row(variant, ttft, after, e2e):
        metrics = {"ttft_ms": Estimate(ttft), "decode_phase_ms": Estimate(after), "e2e_ms": Estimate(e2e)}
        return GroupSummary(variant, "report", 3, 0, metrics=metrics)

    # a: 1,000 + 800 = 1,800 ms of medians, but its median e2e is 1,900; b: 900 + 950, e2e 1,850
    chart = cd.headline_chart([row("a", 1000, 800, 1900), row("b", 900, 950, 1850)])
    bars = {b.variant: b for b in chart.groups[0].bars}
    assert bars["a"].total_ms == 1900 and bars["b"].total_ms == 1850  # b is faster, as in the table
    assert bars["a"].prefill_ms == 1000 and bars["a"].decode_ms == 900
    assert "median e2e (the table's)" in chart.notes[0]


def test_the_gui_and_the_report_read_one_list_of_a_runs_charts(fake_run_db):
    """One run: the charts the window's tabs show are the run's list, and the report places every one
    of them (a section of its own, or under "Charts"); each has a tab."""
    from workbench.gui.chartview import CHART_TABS
    from workbench.gui.loading import load_results
    from workbench.report.documents import document_report

    data = load_results(fake_run_db, [1])
    assert data.analysis is not None
    names = [c.name for c in data.charts]
    assert names == [c.name for c in run_charts(data.analysis)]
    assert sorted(document_report(data.analysis, data.charts).figures()) == sorted(names)
    in_tabs = {k for _, keys, _ in CHART_TABS for k in keys}
    assert {c.key for c in data.charts} <= in_tabs
    assert {"headline", "timeline", "sweep", "speedup", "accepted-length", "memory"} <= {
        c.key for c in data.charts
    }
