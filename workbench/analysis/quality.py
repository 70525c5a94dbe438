"""Quality beside speed: how far each variant's predictions are from the baseline's, per token.

The quality pass (:mod:`workbench.run.quality`) has the baseline and each lossy variant score the same
token streams (teacher forcing: every variant predicts each token from the same history). Per scored
position :func:`position_figures` computes, as llama.cpp's ``llama-perplexity --kl-divergence`` does:

- ``kld``: KL(P_baseline ‖ P_variant) = Σ_x p_b(x) (log p_b(x) − log p_v(x)) over the vocabulary;
- ``delta_p``: p_v(token) − p_b(token), the change of the given token's probability;
- ``same_top``: whether both put the same token first;
- ``nll_base`` / ``nll``: −log p of the given token under each.

:func:`quality_summary` aggregates them per variant × workload and overall: mean KLD with a bootstrap
CI over prompts (positions within one prompt are not independent), median, p99, max; same-top share
with its CI; mean and RMS Δp; the perplexity ratio exp(mean nll − mean nll_base) with a paired
bootstrap CI; the first position where the top tokens differ. Definitions: docs/metrics.md, "Quality".

When a variant only returns a server's top-k log-probabilities, its KLD is a lower bound: the tokens
outside its top-k are merged into one "rest" outcome on both sides (the log-sum inequality).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from workbench.analysis.stats import BOOTSTRAP_RESAMPLES
from workbench.store.loaded import LoadedRun, QualityPositionRecord, QualityVariantRecord

__all__ = [
    "REFERENCE_TOP_K",
    "GroupQuality",
    "QualityFigures",
    "RunQuality",
    "group_quality",
    "position_figures",
    "quality_by_variant",
    "quality_summary",
    "reference_rows",
    "run_quality",
]

#: log-probabilities the reference keeps per position (the baseline's k most likely tokens)
REFERENCE_TOP_K = 32
#: the CI level of the bootstrap (as the speed-ups')
_CI = 0.95
_SEED = 20240531


def _rows(array: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(array, dtype=np.float64)


# the one explicit Any of analysis: arrays and the method's name in one dict, as run/quality.py reads them
def position_figures(  # type: ignore[explicit-any]
    base: Mapping[str, npt.ArrayLike], variant: Mapping[str, npt.ArrayLike], tokens: Sequence[int]
) -> dict[str, Any]:
    """Per-position figures of one scored stream. ``base`` holds the baseline's full ``logprobs``
    (``[n, vocab]``); ``variant`` either its full ``logprobs`` or ``top_ids``/``top_logprobs``/
    ``token_logprobs`` (a server's). ``tokens`` are the ``n`` scored tokens. Returns arrays
    ``kld``, ``delta_p``, ``same_top``, ``nll_base``, ``nll``, ``top_id`` and ``method``."""
    lb = _rows(base["logprobs"])
    tok = np.asarray(tokens, dtype=np.int64)
    n = len(tok)
    if lb.shape[0] != n:
        raise ValueError(f"the baseline scored {lb.shape[0]} positions, not {n}")
    rows = np.arange(n)
    if variant.get("logprobs") is not None:
        lv = _rows(variant["logprobs"])
        if lv.shape[0] != n:
            raise ValueError(f"the variant scored {lv.shape[0]} positions, not {n}")
        if lv.shape[1] != lb.shape[1]:  # a padded embedding: compare the shared vocabulary
            vocab = min(lv.shape[1], lb.shape[1])
            lb, lv = _renormalized(lb[:, :vocab]), _renormalized(lv[:, :vocab])
        pb = np.exp(lb)
        with np.errstate(invalid="ignore", over="ignore"):
            terms = np.where(pb > 0, pb * (lb - lv), 0.0)
        kld = np.maximum(terms.sum(axis=1), 0.0)  # rounding can make an A/A −1e-9
        top_b, top_v = lb.argmax(axis=1), lv.argmax(axis=1)
        lv_token = lv[rows, tok]
        method = "full"
    else:
        ids = np.asarray(variant["top_ids"], dtype=np.int64)
        lps = _rows(variant["top_logprobs"])
        lv_token = _rows(variant["token_logprobs"])
        pb = np.exp(lb)
        pb_k = np.take_along_axis(pb, ids, axis=1)
        lb_k = np.take_along_axis(lb, ids, axis=1)
        pv_k = np.exp(lps)
        rest_b = np.clip(1.0 - pb_k.sum(axis=1), 1e-12, 1.0)
        rest_v = np.clip(1.0 - pv_k.sum(axis=1), 1e-12, 1.0)
        kld = np.maximum((pb_k * (lb_k - lps)).sum(axis=1) + rest_b * np.log(rest_b / rest_v), 0.0)
        top_b, top_v = lb.argmax(axis=1), ids[:, 0]
        method = "top-k"
    lb_token = lb[rows, tok]
    return {
        "kld": kld,
        "delta_p": np.exp(lv_token) - np.exp(lb_token),
        "same_top": (top_b == top_v).astype(np.int64),
        "nll_base": -lb_token,
        "nll": -lv_token,
        "top_id": top_v.astype(np.int64),
        "method": method,
    }


def _renormalized(logprobs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    top = logprobs.max(axis=1, keepdims=True)
    return logprobs - (top + np.log(np.exp(logprobs - top).sum(axis=1, keepdims=True)))


def reference_rows(
    base: Mapping[str, npt.ArrayLike], tokens: Sequence[int], k: int = REFERENCE_TOP_K
) -> list[dict[str, int | float | bytes]]:
    """The baseline's compact reference per scored position: the token's log-probability and the k
    most likely tokens (ids int32, log-probabilities float32, little-endian bytes, best first)."""
    lb = np.asarray(base["logprobs"], dtype=np.float32)
    k = min(k, lb.shape[1])
    top = np.argpartition(-lb, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(lb, top, axis=1), axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    top_lp = np.take_along_axis(lb, top, axis=1)
    out = []
    for i, token in enumerate(tokens):
        out.append(
            {
                "token_id": int(token),
                "logprob": float(lb[i, int(token)]),
                "top_ids": top[i].astype("<i4").tobytes(),
                "top_logprobs": top_lp[i].astype("<f4").tobytes(),
            }
        )
    return out


@dataclass(frozen=True)
class QualityFigures:
    """One variant × workload (``workload = None``: every workload) of the quality pass."""

    variant: str
    workload: str | None
    source: str  # output | text
    prompts: int
    positions: int
    kld_mean: float
    kld_ci: tuple[float, float] | None
    kld_median: float
    kld_p99: float
    kld_max: float
    same_top: float  # share of positions, 0..1
    same_top_ci: tuple[float, float] | None
    delta_p_mean: float
    delta_p_rms: float
    ppl_base: float
    ppl: float
    ppl_ratio: float
    ppl_ratio_ci: tuple[float, float] | None
    #: median over prompts of the first position whose top tokens differ (None: none differed)
    first_divergence: float | None
    diverged_prompts: int
    method: str = "full"
    extra: Mapping[str, float] = field(default_factory=dict)  # never set: kept for the JSON's key

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        for key in ("kld_ci", "same_top_ci", "ppl_ratio_ci"):
            if data[key] is not None:
                data[key] = list(data[key])
        return data


def quality_summary(
    positions: Iterable[QualityPositionRecord], methods: Mapping[str, str] | None = None
) -> list[QualityFigures]:
    """Aggregate ``quality_positions`` rows: per (variant, source, workload), then per (variant,
    source) over every workload (``workload = None``). Deterministic (fixed bootstrap seed)."""
    groups: dict[tuple[str, str, str], dict[str, list[QualityPositionRecord]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in positions:
        groups[(row.variant, row.source, row.workload)][row.prompt_id].append(row)
    out: list[QualityFigures] = []
    by_variant: dict[tuple[str, str], dict[tuple[str, str], list[QualityPositionRecord]]] = defaultdict(dict)
    for (variant, source, workload), prompts in groups.items():
        out.append(_figures(variant, workload, source, prompts, methods))
        for prompt_id, rows in prompts.items():
            by_variant[(variant, source)][(workload, prompt_id)] = rows
    for (variant, source), every in by_variant.items():
        if len({key[0] for key in every}) > 1:
            out.append(_figures(variant, None, source, every, methods))
    return out


def quality_by_variant(
    figures: Sequence[QualityFigures], source: str = "output"
) -> dict[str, QualityFigures]:
    """Each variant's overall figures for ``source`` (its only workload's when it has one)."""
    best: dict[str, QualityFigures] = {}
    for f in figures:
        if f.source != source:
            continue
        if f.workload is None or f.variant not in best:
            best[f.variant] = f
    return best


def _figures(
    variant: str,
    workload: str | None,
    source: str,
    prompts: Mapping[str, Sequence[QualityPositionRecord]]
    | Mapping[tuple[str, str], Sequence[QualityPositionRecord]],
    methods: Mapping[str, str] | None,
) -> QualityFigures:
    items = [
        sorted(rows, key=lambda r: r.position)
        for _, rows in sorted(prompts.items(), key=lambda kv: str(kv[0]))
    ]
    arrays = [
        {
            key: np.array([getattr(r, key) for r in rows], dtype=np.float64)
            for key in ("kld", "delta_p", "same_top", "nll", "nll_base")
        }
        for rows in items
    ]
    kld = np.concatenate([a["kld"] for a in arrays])
    same = np.concatenate([a["same_top"] for a in arrays])
    dp = np.concatenate([a["delta_p"] for a in arrays])
    nll = np.concatenate([a["nll"] for a in arrays])
    nll_b = np.concatenate([a["nll_base"] for a in arrays])
    sums = np.array(
        [
            [a["kld"].sum(), a["same_top"].sum(), a["nll"].sum(), a["nll_base"].sum(), len(a["kld"])]
            for a in arrays
        ]
    )
    kld_ci = same_ci = ratio_ci = None
    if len(arrays) > 1:
        rng = np.random.default_rng(_SEED)
        picks = rng.integers(0, len(arrays), size=(BOOTSTRAP_RESAMPLES, len(arrays)))
        totals = sums[picks].sum(axis=1)  # [resamples, 5]
        count = totals[:, 4]
        low, high = (1 - _CI) / 2, 1 - (1 - _CI) / 2
        kld_ci = _interval(totals[:, 0] / count, low, high)
        same_ci = _interval(totals[:, 1] / count, low, high)
        ratio_ci = _interval(np.exp((totals[:, 2] - totals[:, 3]) / count), low, high)
    firsts = []
    for a in arrays:
        differ = np.flatnonzero(a["same_top"] == 0)
        if len(differ):
            firsts.append(int(differ[0]))
    return QualityFigures(
        variant=variant,
        workload=workload,
        source=source,
        prompts=len(arrays),
        positions=len(kld),
        kld_mean=float(kld.mean()),
        kld_ci=kld_ci,
        kld_median=float(np.median(kld)),
        kld_p99=float(np.quantile(kld, 0.99)),
        kld_max=float(kld.max()),
        same_top=float(same.mean()),
        same_top_ci=same_ci,
        delta_p_mean=float(dp.mean()),
        delta_p_rms=float(math.sqrt(float((dp**2).mean()))),
        ppl_base=float(math.exp(nll_b.mean())),
        ppl=float(math.exp(nll.mean())),
        ppl_ratio=float(math.exp(nll.mean() - nll_b.mean())),
        ppl_ratio_ci=ratio_ci,
        first_divergence=float(np.median(firsts)) if firsts else None,
        diverged_prompts=len(firsts),
        method=(methods or {}).get(variant, "full"),
    )


def _interval(values: npt.NDArray[np.float64], low: float, high: float) -> tuple[float, float]:
    return float(np.quantile(values, low)), float(np.quantile(values, high))


@dataclass(frozen=True)
class RunQuality:
    """A run's quality pass as read back: each variant's outcome and the figures."""

    variants: Mapping[str, QualityVariantRecord]  # variant → its quality_variants row
    figures: tuple[QualityFigures, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "variants": [
                {k: v for k, v in row.to_row().items() if k not in ("id", "run_id")}
                for row in self.variants.values()
            ],
            "figures": [f.to_dict() for f in self.figures],
        }

    def texts(self) -> list[QualityFigures]:
        """The figures on ``quality_text`` (per variant: its overall figures there)."""
        return [f for f in self.figures if f.source == "text"]


def run_quality(loaded: LoadedRun) -> RunQuality | None:
    """The run's quality pass from its rows, None when it had none."""
    if not loaded.quality_variants:
        return None
    variants = {r.variant: r for r in loaded.quality_variants}
    methods = {name: row.method or "full" for name, row in variants.items()}
    return RunQuality(variants, tuple(quality_summary(loaded.quality_positions, methods)))


@dataclass(frozen=True)
class GroupQuality:
    """One variant × workload's quality as its summary row carries it: ``scored`` with its figures on
    the workload's own outputs, else the variant's status (``reference``, ``lossless``, ``not scored``,
    ``failed``) and why."""

    status: str
    reason: str | None = None
    figures: QualityFigures | None = None  # when scored

    def to_dict(self) -> dict[str, object]:
        if self.figures is not None:
            return {"status": self.status, **self.figures.to_dict()}
        return {"status": self.status, "reason": self.reason}


def group_quality(quality: RunQuality | None, variant: str, workload: str) -> GroupQuality | None:
    """One variant × workload's quality as the summaries carry it (:class:`GroupQuality`); None when
    the run had no quality pass or the variant no row."""
    if quality is None:
        return None
    row = quality.variants.get(variant)
    if row is None:
        return None
    if row.status != "scored":
        return GroupQuality(row.status, row.reason)
    found = next(
        (f for f in quality.figures if (f.variant, f.workload, f.source) == (variant, workload, "output")),
        None,
    )
    if found is None:
        return GroupQuality("not scored", "no prompt of this workload was scored")
    return GroupQuality("scored", None, found)
