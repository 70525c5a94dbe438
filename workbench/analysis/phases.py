"""Prefill or decode? The phase a workload spends its time in, predicted before a run and measured
after it, and what to do about it.

- **Measured**: the prefill share of a workload = median TTFT / (median TTFT + median time after the
  first token), of the reference (baseline) variant — the same numbers as the headline chart's bar.
- **Label**: ``prefill-heavy`` when that share is at least :data:`PREFILL_HEAVY` (60 %),
  ``decode-heavy`` when it is at most :data:`DECODE_HEAVY` (40 %), else ``balanced``. At 60 % a phase
  dominates: halving it saves at least 30 % of the request, halving the other at most 20 %.
- **Predicted** (no run, no DB, no tokenizer — the GUI shows it while workloads are picked): from the
  typical input and output lengths, with a :class:`CostModel` (prefill cost per input token, decode cost
  per output token). Defaults per device kind (:data:`DEFAULT_COST_MODELS`); a run refines them with
  measured slopes (:meth:`CostModel.from_trials`). After a run the measured label wins, and a
  disagreement with the prediction is reported with its cause.
- **Levers**: how each other variant of the run did on the workload (faster, slower, no clear change);
  the advice that names the levers for the dominating phase is worded by :mod:`workbench.report.phases`.
  A variant's lever and the phase it targets are what its strategy class declares
  (``Strategy.lever``, ``Strategy.phase``), read through the registry when the run is analysed
  (:func:`strategy_lever`): nothing is stored, so old runs read the same; a strategy that declares
  none, or is not installed here, gets no lever advice (its name stands for the lever).

Thresholds and defaults are documented in ``docs/analysis.md``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, get_args

from workbench.analysis.stats import fit_line
from workbench.core import registry
from workbench.core.errors import StrategyError
from workbench.core.literals import Phase
from workbench.store.records import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.stats import Estimate
    from workbench.analysis.summary import GroupSummary
    from workbench.spec.workloads import Workload

__all__ = [
    "BATCHING",
    "DECODE_HEAVY",
    "DEFAULT_COST_MODELS",
    "PREFILL_HEAVY",
    "CostModel",
    "LeverResult",
    "Prediction",
    "WorkloadPhase",
    "classify",
    "estimate_tokens",
    "measure_phases",
    "predict_workload",
    "strategy_lever",
    "typical_lengths",
]

PREFILL_HEAVY = 0.60
DECODE_HEAVY = 0.40
CHARS_PER_TOKEN = 4.0  # English text with a BPE tokenizer: a rough, documented estimate
TOKENS_PER_MESSAGE = 4  # chat-template tokens around each message

#: the strategy a batched variant (``batch_size > 1``) is analysed as, whatever strategy decodes it
#: (:func:`workbench.analysis.run.analyze_run`): the batching lever, a decode lever
BATCHING = "batching"
_PHASES: tuple[Phase, ...] = get_args(Phase)


def strategy_lever(strategy: str) -> tuple[str | None, Phase | None]:
    """The lever and the phase it targets that the strategy registered as ``strategy`` declares
    (``Strategy.lever``, ``Strategy.phase``); ``(None, None)`` when it declares none, or when it is not
    installed here (a run made with a plugin read without it) or fails to import: no lever advice,
    never an error. Only registered names are looked up (a stored name is not an import path)."""
    if strategy == BATCHING:
        return "batching", "decode"
    return declared_levers().get(strategy, (None, None))


@cache
def declared_levers() -> dict[str, tuple[str | None, Phase | None]]:
    """Every registered strategy's declared lever and phase, read from the classes once: the first
    call imports the strategy modules (not their engines), later ones import nothing (the GUI's
    results loader calls it before a loader thread exists, so that thread never imports)."""
    declared: dict[str, tuple[str | None, Phase | None]] = {}
    for name in registry.names():
        try:
            cls = registry.get(name)
        except StrategyError:
            continue
        lever, phase = getattr(cls, "lever", None), getattr(cls, "phase", None)
        declared[name] = (
            (lever if isinstance(lever, str) and lever else None),
            (phase if phase in _PHASES else None),
        )
    return declared


def classify(prefill_share: float) -> str:
    if prefill_share >= PREFILL_HEAVY:
        return "prefill-heavy"
    if prefill_share <= DECODE_HEAVY:
        return "decode-heavy"
    return "balanced"


# -- the cost model and the prediction -----------------------------------------------------------------


@dataclass(frozen=True)
class CostModel:
    """TTFT ≈ ``prefill_fixed_ms + prefill_ms_per_token × input tokens``; the time after the first token
    ≈ ``decode_ms_per_token × (output tokens − 1)``. Only the ratio of the two slopes decides the label;
    the absolute values matter once they are measured."""

    prefill_ms_per_token: float
    decode_ms_per_token: float
    prefill_fixed_ms: float = 0.0
    source: str = "default"  # where it comes from: "default:<device kind>", or the variant it was measured on
    measured: bool = False

    @property
    def decode_to_prefill(self) -> float:
        """How many prompt tokens cost as much to prefill as one token to decode."""
        return (
            self.decode_ms_per_token / self.prefill_ms_per_token
            if self.prefill_ms_per_token > 0
            else float("inf")
        )

    def predict(self, input_tokens: float, output_tokens: float) -> Prediction:
        prefill = self.prefill_fixed_ms + self.prefill_ms_per_token * max(input_tokens, 0.0)
        decode = self.decode_ms_per_token * max(output_tokens - 1, 0.0)
        share = prefill / (prefill + decode) if prefill + decode > 0 else 0.0
        return Prediction(share, classify(share), input_tokens, output_tokens, self)

    @classmethod
    def default(cls, device: str = "cpu") -> CostModel:
        return DEFAULT_COST_MODELS.get(device.split(":")[0], DEFAULT_COST_MODELS["cpu"])

    @classmethod
    def from_trials(cls, trials: Sequence[TrialRecord], source: str = "measured") -> CostModel | None:
        """Fit to measured trials (``ok``, not warm-up): TTFT against input tokens by least squares when
        the inputs differ in length (else TTFT / input tokens), decode ms per token = median TPOT."""
        ok = [t for t in trials if t.status == "ok" and not t.warmup]
        points = [(t.input_tokens, t.ttft_ms) for t in ok if t.input_tokens and t.ttft_ms]
        tpots = [t.tpot_ms for t in ok if t.tpot_ms]
        if not points or not tpots:
            return None
        slope, intercept = fit_line([p[0] for p in points], [p[1] for p in points])
        if slope is None or slope <= 0:
            slope, intercept = statistics.median(p[1] / p[0] for p in points), 0.0
        return cls(
            prefill_ms_per_token=slope,
            decode_ms_per_token=statistics.median(tpots),
            prefill_fixed_ms=max(intercept or 0.0, 0.0),
            source=source,
            measured=True,
        )


#: Before any measurement. Prefill runs all prompt tokens through the weights at once (compute-bound);
#: decode reads all weights for each token (bandwidth-bound), so the ratio of the two per-token costs is
#: about the device's FLOP/s per byte/s: ~100+ on datacenter GPUs, ~10-20 on CPUs. Relative units.
DEFAULT_COST_MODELS: dict[str, CostModel] = {
    "cuda": CostModel(
        0.01,
        1.0,
        source="default:cuda",  # GPUs: a decode token costs as much as 100 prompt tokens
    ),
    "mps": CostModel(
        1 / 40,
        1.0,
        source="default:mps",  # Apple GPUs: as much as 40 prompt tokens
    ),
    "cpu": CostModel(
        1 / 15,
        1.0,
        source="default:cpu",  # CPUs: as much as 15 prompt tokens
    ),
}


@dataclass(frozen=True)
class Prediction:
    prefill_share: float
    label: str
    input_tokens: float
    output_tokens: float
    model: CostModel


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` without a tokenizer (``CHARS_PER_TOKEN`` characters per token)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def typical_lengths(workload: Workload) -> tuple[float, float]:
    """Median input and output tokens of a workload's prompts, without a model: exact for the sweeps
    (their prompts are cut to a token count), estimated from characters otherwise; the output is the
    prompt's ``max_new_tokens`` (a model that stops early makes it shorter: see the measured label)."""
    inputs, outputs = [], []
    for item in workload.items:
        p = item.prompt
        if p.input_tokens is not None:
            inputs.append(p.input_tokens)
        elif p.messages is not None:
            inputs.append(sum(estimate_tokens(m["content"]) + TOKENS_PER_MESSAGE for m in p.messages))
        else:
            inputs.append(estimate_tokens(p.prompt or ""))
        outputs.append(item.max_new_tokens)
    return float(statistics.median(inputs)), float(statistics.median(outputs))


def predict_workload(workload: Workload, model: CostModel | None = None, device: str = "cpu") -> Prediction:
    """The phase label of ``workload`` before any run (``model``: e.g. measured in an earlier run)."""
    input_tokens, output_tokens = typical_lengths(workload)
    return (model or CostModel.default(device)).predict(input_tokens, output_tokens)


# -- measured phases and levers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LeverResult:
    """How a variant of the run did against the reference on one workload."""

    variant: str
    strategy: str
    lever: str  # what its strategy declares (Strategy.lever), else the strategy's name
    targets: Phase  # the phase its strategy declares (Strategy.phase), else "both"
    speedup_e2e: Estimate | None
    speedup_ttft: Estimate | None
    speedup_decode: Estimate | None

    @property
    def verdict(self) -> str:
        est = self.speedup_e2e
        if est is None or est.value is None:
            return "unknown"
        if est.lo is None:
            return "faster" if est.value > 1 else "slower"  # one trial: no interval
        if est.lo > 1:
            return "faster"
        if est.hi is not None and est.hi < 1:
            return "slower"
        return "no clear change"


@dataclass(frozen=True)
class WorkloadPhase:
    """The measured phase of one workload, from the reference variant's trials, and how each lever of
    the run did on it (the advice is :mod:`workbench.report.phases`'s)."""

    workload: str
    variant: str  # the reference variant whose trials were measured
    prefill_ms: float  # median TTFT
    decode_ms: float  # median e2e − TTFT
    prefill_share: float
    label: str
    input_tokens: float | None  # medians of the measured trials
    output_tokens: float | None
    max_new_tokens: float | None
    ttft_ms_per_input_token: float | None  # fitted over the reference variant's trials of the whole run
    decode_ms_per_token: float | None  # median TPOT on this workload
    prediction: Prediction | None = None
    levers: tuple[LeverResult, ...] = ()
    #: the cost model fitted on the reference variant's trials of the whole run (None: too few), what
    #: a disagreement with the prediction is explained by
    measured: CostModel | None = None

    @property
    def disagrees(self) -> bool:
        return self.prediction is not None and self.prediction.label != self.label

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "variant": self.variant,
            "prefill_ms": self.prefill_ms,
            "decode_ms": self.decode_ms,
            "prefill_share": self.prefill_share,
            "label": self.label,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "max_new_tokens": self.max_new_tokens,
            "ttft_ms_per_input_token": self.ttft_ms_per_input_token,
            "decode_ms_per_token": self.decode_ms_per_token,
            "predicted_label": self.prediction.label if self.prediction else None,
            "predicted_prefill_share": self.prediction.prefill_share if self.prediction else None,
            "prediction_disagrees": self.disagrees,
            "levers": [
                {
                    "variant": lever.variant,
                    "strategy": lever.strategy,
                    "lever": lever.lever,
                    "targets": lever.targets,
                    "verdict": lever.verdict,
                    "speedup_e2e": lever.speedup_e2e.to_dict() if lever.speedup_e2e else None,
                }
                for lever in self.levers
            ],
        }


def measure_phases(
    summaries: Sequence[GroupSummary],
    trials: Sequence[TrialRecord],
    reference: str | None,
    *,
    strategies: dict[str, str] | None = None,
    device: str = "cpu",
) -> list[WorkloadPhase]:
    """One :class:`WorkloadPhase` per workload, measured on ``reference`` (the baseline variant; the
    first variant when there is none). ``trials``: the run's trial rows; ``strategies``: variant →
    strategy, to name the levers."""
    if not summaries:
        return []
    reference = reference if any(s.variant == reference for s in summaries) else summaries[0].variant
    ref_trials = [t for t in trials if t.variant == reference and t.status == "ok" and not t.warmup]
    model = CostModel.from_trials(ref_trials, source=reference or "measured")
    default = CostModel.default(device)
    phases = []
    for s in summaries:
        if s.variant != reference:
            continue
        prefill, decode = s.metrics["ttft_ms"].value, s.metrics["decode_phase_ms"].value
        if prefill is None or decode is None or prefill + decode <= 0:
            continue
        share = prefill / (prefill + decode)
        rows = [t for t in ref_trials if t.workload == s.workload]
        budget = [t.max_new_tokens for t in rows if t.max_new_tokens]
        input_tokens = s.metrics["input_tokens"].value
        output_tokens = s.metrics["output_tokens"].value
        max_new_tokens = float(statistics.median(budget)) if budget else None
        phases.append(
            WorkloadPhase(
                workload=s.workload,
                variant=reference,
                prefill_ms=prefill,
                decode_ms=decode,
                prefill_share=share,
                label=classify(share),
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                max_new_tokens=max_new_tokens,
                ttft_ms_per_input_token=model.prefill_ms_per_token if model else None,
                decode_ms_per_token=s.metrics["tpot_ms"].value,
                prediction=(
                    default.predict(input_tokens, max_new_tokens or output_tokens or 1)
                    if input_tokens is not None
                    else None
                ),
                levers=tuple(
                    _lever(o, (strategies or {}).get(o.variant, ""))
                    for o in summaries
                    if o.workload == s.workload and o.variant != reference
                ),
                measured=model,
            )
        )
    return phases


def _lever(summary: GroupSummary, strategy: str) -> LeverResult:
    lever, phase = strategy_lever(strategy)
    return LeverResult(
        summary.variant,
        strategy,
        lever or strategy or "other",
        phase or "both",
        summary.speedup_e2e,
        summary.speedup_ttft,
        summary.speedup_decode,
    )
