"""The quality pass: after the timed trials, how much worse each lossy variant predicts than the baseline.

Untimed and after every measured trial, so it disturbs none. The reference streams are the baseline's
own recorded output per prompt (its first measured ok trial: prompt tokens + output tokens, so each
workload is scored on its own kind of text), plus chunks of ``quality_text`` when the spec names
one (``quality_ctx`` tokens each, the second half scored, as llama.cpp's perplexity tool does). The
baseline's worker scores them (:meth:`Session.score`: full distributions, written by the worker to
``.npz`` files in a scratch folder); every variant that needs it scores the same tokens, and
:func:`workbench.analysis.quality.position_figures` compares the two per position. What is stored:
``quality_variants`` (each variant: scored, lossless, not scored and why), ``quality_reference``
(the baseline's top-k per position) and ``quality_positions`` (KLD, Δp, same-top, NLL per variant ×
position), written through the run's recorder (:meth:`RunRecorder.quality`).

Which variants are scored: every variant but the baseline whose strategy can score, except those
lossless by construction (:attr:`Strategy.lossless`) on the baseline's model and dtype, and the
baseline's own configuration (compiled or not): those are *checked* instead (docs/metrics.md,
"Equivalence"). Each is replayed through its own code path (its worker's ``replay``: greedy, untimed,
a :class:`~workbench.strategy.Trace` on the probe recording its target's passes and the log-probabilities
each token was chosen from); the baseline scores prompt + the variant's tokens in one pass and through
those passes (``score`` items with ``passes``); :func:`judge_positions` judges every position, stored in
``equivalence_positions`` (its ``quality_variants`` row stays ``lossless``, ``checked = 'replay'``).
Always, when the pass runs: about two generations' worth of passes per prompt and lossless variant, and
in float32 it is what shows that an exact match was not luck; the pass runs for lossless variants alone
when their arithmetic can differ from float32 on the CPU (:func:`quality_wanted`). A variant whose tokenizer encodes the
prompts differently cannot be compared position by position: "not scored", with that reason. Nothing
in this pass fails the run: a variant that cannot be scored is recorded with the reason.

This module decides what the pass does with each variant and runs it; the reference and the lossy
variants' scores are :mod:`workbench.run.scoring`'s, a lossless variant's check
:mod:`workbench.run.equivalence`'s, the floor it is judged against :mod:`workbench.run.floor`'s, what
they share (the run, its workers, its notes) :mod:`workbench.run.passcontext`'s.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from workbench.core import registry
from workbench.core.errors import StoreError, describe_exception
from workbench.core.strategy import ScoreShape
from workbench.core.variant import Variant
from workbench.run.equivalence import EquivalenceCheck
from workbench.run.floor import Floor
from workbench.run.passcontext import PassContext
from workbench.run.scoring import Scoring, scored_context
from workbench.spec.parse import Spec

__all__ = ["QualityPass", "equivalence_shapes", "quality_wanted", "scored_context", "scoring_plan"]


def _lossless_twin(variant: Variant, baseline: Variant) -> bool:
    """True when ``variant`` generates exactly the baseline's tokens by construction: a lossless
    strategy on the baseline's model and dtype, or the baseline's own configuration (an A/A copy)."""
    if variant.model != baseline.model or variant.dtype != baseline.dtype:
        return False
    if variant.strategy == baseline.strategy and variant.params == baseline.params:
        return True
    try:
        strategy = registry.get(variant.strategy_ref or variant.strategy)
    except Exception:  # a strategy this interpreter cannot import (another python): assume lossy
        return False
    return bool(getattr(strategy, "lossless", False)) and baseline.strategy == "baseline"


def scoring_plan(spec: Spec) -> dict[str, str | None]:
    """Per variant but the baseline: ``None`` when the quality pass scores it, else why not."""
    names = {v.name: v for v in spec.variants}
    baseline = names.get(spec.baseline_variant)
    plan: dict[str, str | None] = {}
    for variant in spec.variants:
        if baseline is None or variant.name == baseline.name:
            continue
        if _lossless_twin(variant, baseline):
            if variant.strategy != baseline.strategy:
                same = "lossless by construction"
            elif variant.compile != baseline.compile:
                same = (
                    "the baseline's configuration, compiled" if variant.compile else "the baseline's, eager"
                )
            else:
                same = "the baseline's configuration"
            plan[variant.name] = f"{same}: checked for numerical equivalence, not scored as lossy"
        else:
            plan[variant.name] = None
    return plan


def equivalence_shapes(spec: Spec) -> dict[str, ScoreShape]:
    """Per lossless variant (:func:`scoring_plan`'s not scored): the shape of its forward passes
    (:meth:`Strategy.score_shape`), through which the pass checks it."""
    names = {v.name: v for v in spec.variants}
    shapes = {}
    for name, reason in scoring_plan(spec).items():
        if reason is None:
            continue
        variant = names[name]
        try:
            strategy = registry.get(variant.strategy_ref or variant.strategy)()
            shapes[name] = strategy.score_shape(variant)
        except Exception:
            continue
    return shapes


def _arithmetic_may_differ(spec: Spec, name: str) -> bool:
    """A variant whose arithmetic can round differently from the baseline's: anything but float32 on
    the CPU (a dtype ``auto`` is float32 there; a device ``auto`` may be a GPU, so it counts)."""
    variant = next(v for v in spec.variants if v.name == name)
    return not (variant.device == "cpu" and variant.dtype in ("float32", "auto"))


def quality_wanted(spec: Spec) -> bool:
    """``quality = true`` (with a baseline and another variant), or unset and some variant is lossy,
    or a lossless lever with passes of another shape (or compiled kernels), on arithmetic that can
    differ from float32 on the CPU (its equivalence is checked)."""
    if len(spec.variants) < 2 or spec.quality is False:
        return False
    plan = scoring_plan(spec)
    if spec.quality:
        return True
    if any(reason is None for reason in plan.values()):
        return True
    # a lossless lever whose passes have another shape than plain decoding's (a copy of the baseline
    # computes the same passes), on arithmetic that rounds them differently
    compiled = {v.name for v in spec.variants if v.compile is not None}
    return any(
        (shape != ScoreShape() or name in compiled) and _arithmetic_may_differ(spec, name)
        for name, shape in equivalence_shapes(spec).items()
    )


class QualityPass:
    """Run the pass for one finished run, in ``context`` (:class:`PassContext`: the spec, the recorder,
    the variants' plans, how to reach a variant's loaded worker, how to report and whether the run
    was cancelled)."""

    def __init__(self, context: PassContext) -> None:
        self.spec = context.spec
        self.context = context
        self.notes = self.context.notes
        self._scoring = Scoring(self.context)
        self._equivalence = EquivalenceCheck(self.context, Floor(self.context))

    def run(self, dead: Sequence[str] = ()) -> list[str]:
        """Score the run (``dead``: the variants whose timed trials failed); returns one-line notes
        for the run's record."""
        context = self.context
        baseline = self.spec.baseline_variant
        if baseline in dead:
            context.report("quality: not scored: the baseline failed")
            return self.notes
        plan = scoring_plan(self.spec)
        scratch = Path(tempfile.mkdtemp(prefix="workbench-quality-"))
        try:
            try:
                streams = self._scoring.reference(baseline, scratch)
            except StoreError:
                raise
            except Exception as exc:  # the pass stops; the timed results stand
                context.note(f"quality: nothing scored: {describe_exception(exc)}")
                streams = None
            if streams is None:
                return self.notes
            self._equivalence.baseline_prompts = {
                (s.workload, s.prompt_id): s.prompt for s in streams if s.source == "output"
            }
            for name, reason in plan.items():
                if context.cancelled():
                    break
                if name in dead:
                    context.record(name, "not scored", "its timed trials failed")
                elif reason is not None:
                    try:
                        # the shape its strategy declares
                        fixed = equivalence_shapes(self.spec).get(name)
                        self._equivalence.check(name, reason, scratch, fixed)
                    except StoreError:
                        raise
                    except Exception as exc:  # the check fails alone; the variant stays lossless, unchecked
                        self._equivalence.record(name, reason, None, [describe_exception(exc)], [])
                else:
                    try:
                        self._scoring.score_variant(name, self._scoring.runs(name, streams), scratch)
                    except StoreError:  # the record itself is at stake: the run's rule decides
                        raise
                    except Exception as exc:  # a variant the pass cannot handle fails only its quality
                        context.record(name, "failed", describe_exception(exc))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return self.notes
