"""Every chart kind fits its canvas: exported to PNG and SVG (and so into report.html) and drawn at the
app's narrower widths, with long variant and workload names and many series, its title, plots and
legend lie inside the canvas — nothing is cut at an edge — and its plot keeps a readable height.

The charts are built by hand (:func:`long_charts`: one per chart class, eight variants with 40-odd
character names, three workloads with long names), so each kind gets the widest legend and labels it
can have; a chart class without a sample here fails the test.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("pyqtgraph")
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from workbench import charts as cd
from workbench.analysis.roofline import RooflineRow
from workbench.analysis.run import Timeline
from workbench.charts.conversation import KvSeries
from workbench.gui import charts
from workbench.gui.chartkinds import CHART_KINDS

VARIANTS = tuple(
    f"{name}-with-a-rather-long-descriptive-name"
    for name in (
        "baseline",
        "prompt-lookup",
        "speculative-draft",
        "int4-onnx-runtime",
        "prefix-cache",
        "int8-dynamic",
        "compressed-prompt",
        "batching-four",
    )
)
WORKLOADS = (
    "summarise-long-documents-workload",
    "multi-turn-conversation-workload",
    "code-completion-workload",
)


def _series(i: int, n: int = 6) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x = tuple(float(64 * 2**k) for k in range(n))
    return x, tuple(10 + 3 * i + 0.05 * v * (1 + i / 8) for v in x)


#: a caption as long as the longest the charts have (the draft-position chart's)
NOTES = [
    "Of the steps that drafted at least i tokens, the share that accepted the first i (a line per variant, a "
    "dash pattern and a marker per workload). Drafting pays when the acceptance over the drafted tokens beats "
    "the 'needed' of the legend: the break-even of the variant's measured draft and verify costs. That is "
    "decode only: the legend's e2e speed-up says whether the variant is faster for the whole request.",
    "A second paragraph, as a chart with two notes has.",
]


def long_charts() -> list[cd.Chart]:
    """A chart of every class, with long names, many series and a long caption."""
    return [dataclasses.replace(chart, notes=list(NOTES)) for chart in _charts()]


def _charts() -> list[cd.Chart]:
    v, w = VARIANTS, WORKLOADS
    sweep = tuple(
        cd.SweepSeries(
            name, *_series(i), lo=(None,) * 6, hi=(None,) * 6, slope=0.05 + i / 100, intercept=10.0
        )
        for i, name in enumerate(v)
    )
    sweep = tuple(
        cd.SweepSeries(
            s.variant,
            s.x,
            s.y,
            tuple(y * 0.9 for y in s.y),
            tuple(y * 1.1 for y in s.y),
            s.slope,
            s.intercept,
        )
        for s in sweep
    )
    speed = tuple(
        cd.SpeedupPoint(wl, name, metric, 0.8 + 0.15 * i, 0.7 + 0.15 * i, 0.95 + 0.15 * i)
        for wl in w
        for i, name in enumerate(v[1:])
        for metric in ("e2e", "ttft", "decode")
    )
    turns = tuple(float(t) for t in range(1, 9))
    return [
        cd.HeadlineChart(
            title="Where the time goes per request: prefill (to the first token) and decode, per variant and workload",
            variants=v,
            groups=tuple(
                cd.HeadlineGroup(
                    wl,
                    tuple(cd.HeadlineBar(name, 100 + 40 * i, 900 - 60 * i, 24) for i, name in enumerate(v)),
                    "decode-heavy: prefill 12 % of e2e (predicted balanced)",
                )
                for wl in w
            ),
        ),
        cd.TimelineChart(
            title=f"Tokens over time on {w[0]}: one representative prompt, every variant",
            variants=v,
            workload=w[0],
            prompt_id="a-prompt-with-a-long-identifier-0001",
            series=tuple(
                Timeline(
                    name,
                    w[0],
                    "p1",
                    0,
                    512,
                    tuple(float(150 + 20 * i + 30 * k) for k in range(33)),
                    tuple(range(33)),
                )
                for i, name in enumerate(v)
            ),
        ),
        cd.SweepChart(
            title=f"TTFT vs input length ({w[0]}, every variant that ran it)",
            variants=v,
            series=sweep,
            source=w[0],
        ),
        cd.ConversationChart(
            title=f"TTFT turn by turn ({w[1]})",
            variants=v,
            series=tuple(
                cd.SweepSeries(
                    s.variant, turns, s.y[:1] * 8, s.lo[:1] * 8, s.hi[:1] * 8, s.slope, s.intercept
                )
                for s in sweep
            ),
            source=w[1],
            kv_cache=tuple(
                KvSeries(name, turns, tuple(2.0 * t + i for t in turns), tuple(200.0 * t for t in turns))
                for i, name in enumerate(v)
            ),
            history=tuple((int(t), 120.0 * t) for t in turns),
            kv_unknown=("an-endpoint-variant-with-a-rather-long-descriptive-name",),
        ),
        cd.ParameterSweepChart(
            title="Decode speed vs num_assistant_tokens_long_parameter_name (speculative-draft-with-a-rather-long-name)",
            variants=w,
            kind="decode",
            series=tuple(
                cd.SweepSeries(
                    wl, (1.0, 2.0, 4.0, 8.0), (20.0, 25.0, 27.0, 26.0), (19.0,) * 4, (28.0,) * 4, 0.5, 20.0
                )
                for wl in w
            ),
            source=v[2],
            x_axis=cd.Axis("num_assistant_tokens_long_parameter_name"),
            y_axis=cd.Axis("decode speed", "tok/s"),
            param="num_assistant_tokens_long_parameter_name",
            base=v[2],
        ),
        cd.SpeedupChart(
            title="Speed-up vs the baseline, per workload", variants=v, baseline=v[0], points=speed
        ),
        cd.BeforeAfterChart(
            title="Run 12 'after the driver upgrade, a long run name' against run 11 'before the driver upgrade'",
            variants=v,
            baseline="run 11",
            points=speed,
            x_axis=cd.Axis("e2e speed-up of run 12 over run 11 (> 1: run 12 is faster)"),
            run_a=11,
            run_b=12,
        ),
        cd.AcceptanceChart(
            title="Accepted length per verify step (speculative variants, all workloads pooled)",
            variants=v,
            counts={name: {k: 10 * (k + i) for k in range(1, 11)} for i, name in enumerate(v[1:4])},
        ),
        cd.DraftPositionChart(
            title="Acceptance by draft position (speculative variants)",
            variants=v,
            workloads=w,
            series=tuple(
                cd.PositionSeries(
                    name,
                    wl,
                    tuple(range(1, 7)),
                    tuple(100 - 8 * p - 3 * i for p in range(6)),
                    tuple(60 - 5 * p for p in range(6)),
                    58.0,
                    12.0,
                    1.89,
                    1.38,
                )
                for i, name in enumerate(v[1:4])
                for wl in w
            ),
        ),
        cd.MemoryChart(
            title="Memory per variant: peak and weights",
            variants=v,
            bars=tuple(
                cd.MemoryBar(name, 900.0 + 50 * i, 270.0, "process_rss_peak") for i, name in enumerate(v)
            ),
        ),
        cd.RooflineChart(
            title="Decode speed vs the memory-bandwidth limit",
            variants=v,
            rows_=tuple(
                RooflineRow(name, wl, 30.0 + i, 60.0, 20.0, 270.0, 5.0, 300.0)
                for wl in w
                for i, name in enumerate(v)
            ),
            bandwidth_gbs=20.0,
        ),
        cd.TargetsChart(
            title="Goodput against each workload's experience targets",
            variants=v,
            bars=tuple(
                cd.TargetBar(wl, name, 0.1 * i, 90.0, "missed", (("ttft_ms", "missed", 700.0, 500.0),))
                for wl in w
                for i, name in enumerate(v)
            ),
        ),
        cd.QualityChart(
            title="Speed against quality: KLD from the baseline vs speed-up",
            variants=v,
            baseline=v[0],
            points=tuple(
                cd.QualityPoint(
                    wl,
                    name,
                    "e2e",
                    0.9 + 0.2 * i,
                    0.8 + 0.2 * i,
                    1.0 + 0.2 * i,
                    0.001 * 3**i,
                    None,
                    None,
                    0.9,
                    "scored",
                )
                for wl in w
                for i, name in enumerate(v)
            ),
        ),
    ]


def _classes() -> set[type]:
    return {kind.data for kind in CHART_KINDS}


def test_every_chart_class_has_a_long_sample():
    assert {type(c) for c in long_charts()} == _classes()


def _outside(rect: QtCore.QRectF, canvas: QtCore.QRectF, slack: float = 0.5) -> bool:
    return (
        rect.left() < canvas.left() - slack
        or rect.top() < canvas.top() - slack
        or rect.right() > canvas.right() + slack
        or rect.bottom() > canvas.bottom() + slack
    )


def _text_rect(item: pg.GraphicsWidget) -> QtCore.QRectF:
    """What a label draws: its text item's rectangle (a label's own may be clipped to its cell)."""
    texts = [c for c in item.childItems() if isinstance(c, QtCore.QObject) and hasattr(c, "toPlainText")]
    rect = item.sceneBoundingRect()
    for text in texts:
        rect = rect.united(text.sceneBoundingRect())
    return rect


def misfits(widget: pg.GraphicsLayoutWidget) -> list[str]:
    """What of a laid-out chart lies outside its canvas: each item of its layout (the title, the
    plots with their axes, the legend, the caption) and each label's text; and each text drawn on a
    plot (a bar's value, a group's header, an interval) that its plot cuts."""
    canvas = widget.viewRect()
    found = []
    for plot in charts.plot_items(widget):
        view = plot.getViewBox().sceneBoundingRect()
        low, high = plot.getViewBox().viewRange()[0]
        span = (high - low) or 1.0
        for item in plot.items:  # the data in view: fitting the texts never narrows the range
            if isinstance(item, pg.PlotDataItem | pg.BarGraphItem) and item.isVisible():
                bounds = item.dataBounds(0)
                if None in (bounds, *(bounds or ())):
                    continue
                if bounds[0] < low - 0.01 * span or bounds[1] > high + 0.01 * span:
                    found.append(f"data {bounds} outside the x range {(low, high)}")
        for item in plot.items:
            if (
                isinstance(item, pg.TextItem)
                and item.isVisible()
                and _outside(item.sceneBoundingRect(), view, 1)
            ):
                found.append(f"text {item.toPlainText()[:40]!r} cut by its plot")
    for item in widget.ci.items:
        rect = _text_rect(item)
        if _outside(rect, canvas):
            what = item.toPlainText() if hasattr(item, "toPlainText") else type(item).__name__
            text = getattr(getattr(item, "item", None), "toPlainText", lambda: "")()
            found.append(
                f"{type(item).__name__} {text[:40]!r}{what if not text else ''}: {rect} outside {canvas}"
            )
    return found


@pytest.mark.parametrize("width", [None, 760])
def test_every_chart_kind_fits_its_canvas(qapp, width):
    """``None``: the exported size (PNG, SVG, report.html); 760: a narrow chart panel in the app."""
    for chart in long_charts():
        size = None if width is None else (width, charts.preferred_size(chart)[1])
        with charts.render(chart, size, notes=True) as widget:
            assert not misfits(widget), (type(chart).__name__, misfits(widget))
            if width is None:  # the wrapped title, legend and caption took nothing from the plots
                assert _plots_height(widget) >= _planned(chart, widget.height()) - 2, type(chart).__name__


def _plots_height(widget: pg.GraphicsLayoutWidget) -> float:
    """The plots' heights together (panels share what the chart has)."""
    return sum(p.getViewBox().sceneBoundingRect().height() for p in charts.plot_items(widget))


def _planned(chart: cd.Chart, height: int) -> float:
    """The plots' height of ``chart`` at the kind's height, on a canvas so wide that nothing wraps."""
    with charts.render(chart, (20_000, charts.preferred_size(chart)[1]), notes=True) as wide:
        return _plots_height(wide)


def test_a_narrow_chart_panel_grows_a_chart_instead_of_squeezing_its_plot(qtbot):
    """In the app's Acceptance tab, 760 px wide, the long draft-position chart (nine legend entries
    of two lines each) grows by what its legend and caption take wrapped to that width, and the tab
    scrolls; wide or narrow, nothing of it falls off the canvas."""
    from workbench.gui.chartview import MIN_CHART_HEIGHT, ChartPanel

    chart = next(c for c in long_charts() if isinstance(c, cd.DraftPositionChart))
    least = min(charts.preferred_size(chart)[1], MIN_CHART_HEIGHT)
    heights = {}
    for width in (3000, 760):
        panel = ChartPanel()
        qtbot.addWidget(panel)
        panel.resize(width, 500)
        panel.show()
        panel.set_charts([chart])
        panel.show_tab(chart.key)
        panel.draw_all()
        widget = panel.widgets[chart.name]
        qtbot.waitUntil(lambda w=widget: w.minimumHeight() >= least + charts.wrapped_extra(w), timeout=5_000)
        qtbot.waitUntil(lambda w=widget: w.height() >= w.minimumHeight() and not misfits(w), timeout=5_000)
        heights[width] = (widget.height(), _plots_height(widget))
    assert heights[760][0] > heights[3000][0]  # grew by what its wrapped texts take, and scrolls


def test_exported_png_and_svg_are_the_canvas(qapp):
    """The files hold the canvas the fit was checked on: the chart's width, 2x in a PNG, and the same
    height in PNG and SVG (grown past the kind's where a long legend needed it)."""
    for chart in long_charts():
        w, h = charts.preferred_size(chart)
        with charts.render(chart) as widget:
            canvas = widget.viewRect()
        image = QtGui.QImage()
        assert image.loadFromData(charts.png_bytes(chart), "PNG")  # 2x, as exported
        assert (image.width(), image.height()) == (2 * w, 2 * round(canvas.height())), type(chart).__name__
        assert canvas.height() >= h
        box = [float(x) for x in ET.fromstring(charts.svg_bytes(chart)).get("viewBox", "").split()]
        assert box[2:] == [w, round(canvas.height())], type(chart).__name__


def test_the_sample_runs_charts_fit(qapp, tmp_path):
    """The demo's own charts (resources/sample/demo.db), as exported and at the app's narrower widths:
    the acceptance-by-draft-position chart once lost positions 5-6, half its title and a legend entry."""
    import shutil

    from workbench.analysis.run import analyze_run
    from workbench.gui.smoke import sample_db
    from workbench.store import Store

    db = tmp_path / "demo.db"
    shutil.copyfile(sample_db(), db)
    with Store(db, create=False) as store:
        found = cd.run_charts(analyze_run(store.load_run(1)))
    assert "draft-positions" in {c.key for c in found}
    for chart in found:
        for size in (None, (900, charts.preferred_size(chart)[1])):
            with charts.render(chart, size, notes=True) as widget:
                assert not misfits(widget), (chart.name, size, misfits(widget))
                if size is None:  # as exported, the texts the kind drew all show (none hidden to fit)
                    texts = [
                        i for p in charts.plot_items(widget) for i in p.items if isinstance(i, pg.TextItem)
                    ]
                    assert all(i.isVisible() for i in texts), chart.name
