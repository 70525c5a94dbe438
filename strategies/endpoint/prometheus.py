"""A server's own figures from its Prometheus ``/metrics`` page: parsing and deltas over a window.

Standard library only. The figures follow vLLM's metric names (v1 engine); other servers' pages are
parsed too, and every counter or histogram of theirs that moved lands in ``extra``.

Histograms give sums and counts, so a window's server-side latency is a *mean* (Δsum / Δcount);
counters give totals (Δvalue). Series are summed over labels (engines, finish reasons), restricted
to the served model when the page labels ``model_name``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Scrape", "parse_prometheus", "window_figures"]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Scrape:
    """One scrape: series values and metric types (``# TYPE``)."""

    series: dict[tuple[str, frozenset[tuple[str, str]]], float] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    def total(self, name: str, model: str | None = None, **labels: str) -> float | None:
        """Sum of every series called ``name`` (for ``model`` when the series carry ``model_name``)."""
        found = False
        value = 0.0
        for (series_name, series_labels), v in self.series.items():
            if series_name != name:
                continue
            d = dict(series_labels)
            if model is not None and d.get("model_name", model) != model:
                continue
            if any(d.get(k) != want for k, want in labels.items()):
                continue
            found = True
            value += v
        return value if found else None

    def by_label(self, name: str, label: str, model: str | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for (series_name, series_labels), v in self.series.items():
            d = dict(series_labels)
            if series_name != name or label not in d:
                continue
            if model is not None and d.get("model_name", model) != model:
                continue
            out[d[label]] = out.get(d[label], 0.0) + v
        return out


def parse_prometheus(text: str) -> Scrape:
    """Parse the Prometheus text exposition format (what ``/metrics`` serves)."""
    scrape = Scrape()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                scrape.types[parts[2]] = parts[3]
            continue
        m = _LINE.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        key = (name, frozenset(_LABEL.findall(labels or "")))
        scrape.series[key] = scrape.series.get(key, 0.0) + number
    return scrape


# figure column → (histogram base name(s), newest first)
_HISTOGRAMS_MS = {
    "ttft_ms": ("vllm:time_to_first_token_seconds",),
    "itl_ms": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot_ms": ("vllm:request_time_per_output_token_seconds",),
    "e2e_ms": ("vllm:e2e_request_latency_seconds",),
    "queue_ms": ("vllm:request_queue_time_seconds",),
    "prefill_ms": ("vllm:request_prefill_time_seconds",),
    "decode_ms": ("vllm:request_decode_time_seconds",),
}
_COUNTERS = {
    "requests": ("vllm:request_success_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
}
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def requests_done(scrape: Scrape, model: str | None) -> float | None:
    """The server's count of finished requests (to wait until a window's requests are counted)."""
    return scrape.total(_COUNTERS["requests"][0], model)


def _delta(before: Scrape, after: Scrape, name: str, model: str | None) -> float | None:
    b, a = before.total(name, model), after.total(name, model)
    if a is None:
        return None
    return a - (b or 0.0)


def _first(before: Scrape, after: Scrape, names: Iterable[str], model: str | None) -> float | None:
    for name in names:
        d = _delta(before, after, name, model)
        if d is not None:
            return d
    return None


def window_figures(before: Scrape, after: Scrape, model: str | None) -> dict[str, object]:
    """The columns of ``server_metrics`` for the window between two scrapes."""
    figures: dict[str, object] = {}
    known: set[str] = set()
    for column, names in _HISTOGRAMS_MS.items():
        for name in names:
            count = _delta(before, after, name + "_count", model)
            total = _delta(before, after, name + "_sum", model)
            if count is None or total is None:
                continue
            known.update({name + "_count", name + "_sum"})
            figures[column] = total / count * 1000 if count > 0 else None
            if column == "ttft_ms":
                figures["ttft_count"] = int(count)
            break
    for column, names in _COUNTERS.items():
        value = _first(before, after, names, model)
        known.update(names)
        if value is not None:
            figures[column] = round(value)
    per_pos_after = after.by_label(_PER_POS, "position", model)
    if per_pos_after:
        per_pos_before = before.by_label(_PER_POS, "position", model)
        positions = sorted(per_pos_after, key=lambda p: int(p) if p.isdigit() else 0)
        figures["spec_accepted_per_pos"] = json.dumps(
            [round(per_pos_after[p] - per_pos_before.get(p, 0.0)) for p in positions]
        )
    known.add(_PER_POS)
    extra: dict[str, float] = {}
    for name in sorted({n for n, _ in after.series}):
        if name in known or name.endswith(("_bucket", "_created")):
            continue
        base = name.removesuffix("_sum").removesuffix("_count")
        kind = after.types.get(base) or after.types.get(name.removesuffix("_total"))
        if kind not in ("counter", "histogram", "summary") and not name.endswith("_total"):
            continue  # gauges: a difference of two readings means nothing
        d = _delta(before, after, name, model)
        if d:
            extra[name] = d
    if extra:
        figures["extra"] = extra
    return figures
