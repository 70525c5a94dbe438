"""The report model: what a person reads about one run (or two runs compared), built once and rendered
to plain text (the CLI), Markdown, HTML (the exported report) and the GUI's panel.

A :class:`Report` is a title, a few meta lines and :class:`Section` s in reading order — verdict first,
then the main table, then phases, drafting, quality, targets and notes. Each section holds blocks:
:class:`Text` (a paragraph), :class:`Bullets`, :class:`Table` and :class:`Figure` (a chart by name: the
documents embed or link it, the terminal skips it). A block marked ``detail`` is left out of the
terminal's default view (``--detail`` shows it); the documents and the GUI show every block.

The words are written where the sections are built (:mod:`workbench.report.run_report`); this module
only lays them out, so every view says the same thing in the same order.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Block",
    "Bullets",
    "Figure",
    "JSONObject",
    "Report",
    "Section",
    "Table",
    "TableRows",
    "Text",
    "md_escape",
    "render_html",
    "render_markdown",
    "render_text",
    "text_table",
]


@dataclass
class Text:
    """A paragraph. ``strong``: said first and loudly (the verdict's lines); ``note``: a footnote."""

    text: str
    detail: bool = False
    strong: bool = False
    note: bool = False


@dataclass
class Bullets:
    items: list[str]
    detail: bool = False
    strong: bool = False
    #: items that are findings (highlighted in the documents)
    marked: frozenset[int] = frozenset()


#: a JSON object of the report's data (``show --json``, ``summary.json``, ``comparison.json``): what
#: :func:`workbench.formatting.json_text` writes (figures, words, lists and dicts of them; a value JSON
#: has no type for as its text)
JSONObject = dict[str, object]


#: a table's headers and rows before it is laid out (what the table builders of the report modules
#: return; ``Table(*rows, title=...)`` places them in a section)
TableRows = tuple[list[str], list[list[str]]]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    title: str = ""
    detail: bool = False
    #: headers shown only with ``wide`` (the terminal's ``--wide``; the documents show them all)
    wide: frozenset[str] = frozenset()
    #: the column whose cells are variant names (a colour swatch beside them in HTML), or None
    colour_column: int | None = 0

    def columns(self, wide: bool) -> TableRows:
        """The headers and rows with the wide-only columns left out unless ``wide``."""
        if wide or not self.wide:
            return self.headers, self.rows
        keep = [i for i, h in enumerate(self.headers) if h not in self.wide]
        return [self.headers[i] for i in keep], [[row[i] for i in keep] for row in self.rows]


@dataclass
class Figure:
    """A chart of the run by its name (``workbench.charts``); the terminal leaves it out."""

    name: str
    detail: bool = False


Block = Text | Bullets | Table | Figure


@dataclass
class Section:
    """``key``: verdict, table, phases, drafting, quality, targets, notes, variants, environment, …"""

    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, block: Block) -> Section:
        self.blocks.append(block)
        return self

    def __bool__(self) -> bool:
        return bool(self.blocks)


@dataclass
class Report:
    title: str
    meta: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)

    def figures(self) -> list[str]:
        return [b.name for s in self.sections for b in s.blocks if isinstance(b, Figure)]


# -- plain text ---------------------------------------------------------------------------------


#: the narrowest a column of :func:`text_table` is wrapped to
MIN_WRAPPED_COLUMN = 16


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, width: int | None = None) -> str:
    """Columns padded to their widest cell, a rule under the headers. ``width``: the widest columns'
    cells are wrapped (onto the row's further lines) until a line fits in that many characters, no
    column narrower than :data:`MIN_WRAPPED_COLUMN`."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    if width is not None:
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        while excess > 0:
            widest = max(range(len(widths)), key=lambda i: widths[i])
            if widths[widest] <= MIN_WRAPPED_COLUMN:
                break
            widths[widest] -= 1
            excess -= 1
    lines = []
    for number, row in enumerate(cells):
        wrapped = [
            textwrap.wrap(c, w, break_on_hyphens=False) or [""] if len(c) > w else [c]
            for c, w in zip(row, widths, strict=True)
        ]
        for k in range(max(len(parts) for parts in wrapped)):
            parts = [p[k] if k < len(p) else "" for p in wrapped]
            lines.append("  ".join(c.ljust(w) for c, w in zip(parts, widths, strict=True)).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_text(
    report: Report,
    *,
    width: int = 120,
    detail: bool = False,
    wide: bool = False,
    sections: Sequence[str] | None = None,
    header: bool = True,
) -> str:
    """The report for a terminal: blocks marked ``detail`` only with ``detail``, wide-only columns only
    with ``wide``, paragraphs wrapped to ``width``; ``sections``: only these keys."""
    out: list[str] = []
    if header:
        out += [report.title, *report.meta]
    for section in report.sections:
        if sections is not None and section.key not in sections:
            continue
        shown = [b for b in section.blocks if (detail or not b.detail) and not isinstance(b, Figure)]
        if not shown:
            continue
        if out:
            out.append("")
        if section.title:
            out.append(section.title)
        for block in shown:
            out += _text_block(block, width, wide or detail)
    return "\n".join(out)


def _text_block(block: Block, width: int, wide: bool) -> list[str]:
    if isinstance(block, Text):
        return textwrap.wrap(block.text, width, subsequent_indent="  ", break_on_hyphens=False) or [""]
    if isinstance(block, Bullets):
        lines = []
        for item in block.items:
            lines += textwrap.wrap(
                item, width, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False
            )
        return lines
    if isinstance(block, Table):
        headers, rows = block.columns(wide)
        if not rows:
            return []
        return ([block.title] if block.title else []) + text_table(headers, rows).split("\n")
    return []


# -- Markdown -----------------------------------------------------------------------------------


#: what a Markdown renderer would read as markup in a name or a prompt: the start of an HTML tag,
#: comment or declaration (renderers that allow HTML would run it), an entity, and a link or image
#: (``](`` / ``][``)
_MD_UNSAFE = re.compile(r"<(?=[A-Za-z/!?])|&(?=[A-Za-z#])|\](?=[(\[])")
_MD_SAFE = {"<": "&lt;", "&": "&amp;", "]": "\\]"}


def md_escape(text: str) -> str:
    """``text`` (the report's words, with run, variant and workload names and prompts in them) safe in
    Markdown: it reads the same, and nothing in it becomes an HTML tag, an entity or a link — as
    :func:`render_html` escapes it. What the report writes as Markdown itself (`code`, **strong**,
    the CIs' ``[lo–hi]``) is left as it is."""
    return _MD_UNSAFE.sub(lambda m: _MD_SAFE[m.group()], text)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return md_escape(str(text)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: Report, image: Callable[[str], str | None] | None = None) -> str:
    """The report as Markdown; ``image(name)``: the Markdown of a figure (a link), or None to leave
    it out."""
    esc = md_escape
    out = [f"# {esc(report.title)}", ""]
    if report.meta:
        out += [esc(" · ".join(report.meta)), ""]
    for section in report.sections:
        if not section:
            continue
        if section.title:
            out += [f"## {esc(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, Text):
                text = esc(block.text)
                out += [f"**{text}**" if block.strong else text, ""]
            elif isinstance(block, Bullets):
                out += [f"- **{esc(i)}**" if block.strong else f"- {esc(i)}" for i in block.items] + [""]
            elif isinstance(block, Table) and block.rows:
                title = [esc(block.title), ""] if block.title else []
                out += [*title, md_table(block.headers, block.rows), ""]
            elif isinstance(block, Figure) and image is not None:
                link = image(block.name)
                if link:
                    out += [link, ""]
    return "\n".join(out)


# -- HTML ---------------------------------------------------------------------------------------

_CODE = re.compile(r"`([^`]+)`")


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    colours: dict[str, str] | None = None,
    colour_column: int | None = 0,
) -> str:
    colours = colours or {}
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text = html.escape(str(c))
            if i == colour_column and c in colours:
                text = f'<span class="swatch" style="background:{colours[c]}"></span>{text}'
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(
    report: Report,
    figure: Callable[[str], str | None] | None = None,
    colours: dict[str, str] | None = None,
    *,
    heading: int = 2,
    sections: Sequence[str] | None = None,
    detail: bool = True,
) -> str:
    """The sections as an HTML fragment (no ``<html>``: the exported page and the GUI's panel wrap
    it). ``figure(name)``: a figure's HTML, or None to leave it out; ``heading``: the level of the
    section titles; ``sections``: only these keys; ``detail``: False leaves the detail blocks out."""

    def esc(text: str) -> str:  # `code` in the words becomes <code>
        return _CODE.sub(r"<code>\1</code>", html.escape(text))

    parts: list[str] = []
    for section in report.sections:
        if not section or (sections is not None and section.key not in sections):
            continue
        blocks = [b for b in section.blocks if detail or not b.detail]
        if not blocks:
            continue
        parts.append(f'<section class="{esc(section.key)}">')
        if section.title:
            parts.append(f"<h{heading}>{esc(section.title)}</h{heading}>")
        for block in blocks:
            if isinstance(block, Text):
                css = "verdict" if block.strong else "note" if block.note else ""
                parts.append(
                    f'<p class="{css}">{esc(block.text)}</p>' if css else f"<p>{esc(block.text)}</p>"
                )
            elif isinstance(block, Bullets):
                items = []
                for i, item in enumerate(block.items):
                    text = esc(item)
                    if block.strong:
                        text = f'<span class="label">{text}</span>'
                    elif i in block.marked:
                        text = f'<span class="finding">{text}</span>'
                    items.append(f"<li>{text}</li>")
                parts.append("<ul>" + "".join(items) + "</ul>")
            elif isinstance(block, Table) and block.rows:
                if block.title:
                    parts.append(f'<p class="note">{esc(block.title)}</p>')
                parts.append(html_table(block.headers, block.rows, colours, block.colour_column))
            elif isinstance(block, Figure) and figure is not None:
                made = figure(block.name)
                if made:
                    parts.append(made)
        parts.append("</section>")
    return "\n".join(parts)
