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
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.equivalence import judge_positions
from workbench.analysis.quality import position_figures, reference_rows
from workbench.core import registry
from workbench.core.errors import StoreError, describe_exception
from workbench.core.literals import QualityStatus
from workbench.core.strategy import ScoreShape
from workbench.core.variant import Variant
from workbench.run import events as ev
from workbench.run.plan import VariantPlan
from workbench.run.process import WorkerProcess
from workbench.run.recording import RunRecorder
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


def scored_context(prompt: Sequence[int], output: Sequence[int], ctx: int) -> tuple[list[int], int]:
    """The stream a prompt + output is scored as, and where its output starts: within ``ctx`` tokens,
    the prompt cut to its last tokens when it must be (never below half a context)."""
    keep = max(ctx - len(output), ctx // 2)
    kept = list(prompt[-keep:]) if len(prompt) > keep else list(prompt)
    return kept + list(output), len(kept)


@dataclass
class _Stream:
    """One token stream the pass scores: a prompt + the baseline's output, or a corpus chunk."""

    source: str  # output | text
    workload: str
    prompt_id: str
    tokens: list[int]
    start: int
    base_path: Path | None = None
    trial: int | None = None  # the baseline plan's trial index (source = output)
    prompt: list[int] = field(default_factory=list)  # the prompt's whole encoding (source = output)
    position_shift: int = 0  # scored under a changed prompt: its positions + this = the baseline's


class QualityPass:
    """Run the pass for one finished run. ``worker_for(plan)`` returns the variant's loaded worker
    (loading it again when its worker has closed) or None; ``report`` says what is going on."""

    def __init__(
        self,
        spec: Spec,
        recorder: RunRecorder,
        plans: Sequence[VariantPlan],
        *,
        worker_for: Callable[[VariantPlan], WorkerProcess | None],
        report: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> None:
        self.spec = spec
        self.recorder = recorder  # every write goes through it; the reads are the store's
        self.store = recorder.store
        assert recorder.run_id is not None, "the run has not started"
        self.run_id = recorder.run_id
        self.plans = {p.variant.name: p for p in plans}
        self.worker_for = worker_for
        self.report = report
        self.cancelled = cancelled
        self.notes: list[str] = []
        #: the baseline's log-probabilities of the equivalence check, per stream (one pass) and per
        #: stream × recorded passes: each scored once, whichever variant ran it
        self._scored: dict[str, Any] = {}
        #: the baseline's reference streams (their prompts' encodings), once the reference is scored
        self._baseline_streams: list[_Stream] = []
        #: the quality_text, read once by the reference (the baseline and every variant encode it)
        self._corpus: str | None = None

    def run(self, dead: Sequence[str] = ()) -> list[str]:
        """Score the run (``dead``: the variants whose timed trials failed); returns one-line notes
        for the run's record."""
        baseline = self.spec.baseline_variant
        if baseline in dead:
            self.report("quality: not scored: the baseline failed")
            return self.notes
        plan = scoring_plan(self.spec)
        scratch = Path(tempfile.mkdtemp(prefix="workbench-quality-"))
        try:
            try:
                streams = self._reference(baseline, scratch)
            except StoreError:
                raise
            except Exception as exc:  # the pass stops; the timed results stand
                self._note(f"quality: nothing scored: {describe_exception(exc)}")
                streams = None
            if streams is None:
                return self.notes
            self._baseline_streams = [s for s in streams if s.source == "output"]
            for name, reason in plan.items():
                if self.cancelled():
                    break
                if name in dead:
                    self._record(name, "not scored", "its timed trials failed")
                elif reason is not None:
                    try:
                        self._check_variant(name, reason, scratch)
                    except StoreError:
                        raise
                    except Exception as exc:  # the check fails alone; the variant stays lossless, unchecked
                        self._record_check(name, reason, None, [describe_exception(exc)], [])
                else:
                    try:
                        self._score_variant(name, self._runs(name, streams), scratch)
                    except StoreError:  # the record itself is at stake: the run's rule decides
                        raise
                    except Exception as exc:  # a variant the pass cannot handle fails only its quality
                        self._record(name, "failed", describe_exception(exc))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return self.notes

    # -- the baseline's reference ------------------------------------------------------------------

    def _reference(self, baseline: str, scratch: Path) -> list[_Stream] | None:
        plan = self.plans[baseline]
        streams = self._output_streams(plan)
        if not streams:
            self._note(
                "quality: not scored: the baseline has no greedy output to score (no ok trial with token ids)"
            )
            return None
        worker = self.worker_for(plan)
        if worker is None:
            self._note("quality: not scored: the baseline's worker could not be started again")
            return None
        self.report(f"quality: {baseline} scores {len(streams)} reference streams")
        if self.spec.quality_text is not None:
            self._corpus = self.spec.quality_text.read_text(encoding="utf-8")
        texts = [self._corpus] if self._corpus is not None else []
        encoded = self._encode(worker, [s.trial for s in streams if s.trial is not None], texts)
        if encoded is None:
            self._note(f"quality: not scored: {baseline}'s worker did not encode the prompts")
            return None
        ctx = self.spec.quality_ctx
        for stream, prompt_ids in zip(streams, encoded.trials, strict=True):
            # the context the pass scores in: a prompt + output longer than quality_ctx keeps the
            # prompt's last tokens (at least half a context), as a corpus chunk keeps half a context
            stream.prompt = list(prompt_ids)
            stream.tokens, stream.start = scored_context(stream.prompt, stream.tokens, ctx)
        if texts and self.spec.quality_text is not None:
            streams += self._text_streams(encoded.texts[0], self.spec.quality_text.name)
        scored = self._score(worker, streams, scratch, baseline)
        if not isinstance(scored, str):
            if all(r.path is None for r in scored):
                scored = scored[0].error or "nothing was scored"
            elif any(r.method == "top-k" for r in scored):
                scored = (
                    "it returns only a server's top log-probabilities; a reference needs whole distributions"
                )
        if isinstance(scored, str):
            self.recorder.quality({"variant": baseline, "status": "not scored", "reason": scored})
            self._note(
                f"quality: nothing scored: the baseline ({baseline}) cannot be the reference: {scored}"
            )
            return None
        reference: list[dict[str, Any]] = []
        kept = []
        import numpy as np

        for stream, result in zip(streams, scored, strict=True):
            if result.path is None:
                continue
            stream.base_path = Path(result.path)
            kept.append(stream)
            with np.load(stream.base_path) as data:
                rows = reference_rows(data, stream.tokens[stream.start :])
            for offset, row in enumerate(rows):
                reference.append(
                    {
                        "source": stream.source,
                        "workload": stream.workload,
                        "prompt_id": stream.prompt_id,
                        "position": stream.start + offset,
                        **row,
                    }
                )
        positions = sum(len(s.tokens) - s.start for s in kept)
        ms = sum(r.score_ms or 0 for r in scored)
        self.recorder.quality(
            {
                "variant": baseline,
                "status": "reference",
                "method": "full",
                "positions": positions,
                "score_ms": ms,
            },
            reference=reference,
        )
        return kept

    def _output_streams(self, plan: VariantPlan) -> list[_Stream]:
        """The baseline's first measured ok trial per prompt with its output's token ids."""
        index = {
            (t.workload, t.prompt.id, t.repetition): i for i, t in enumerate(plan.trials) if not t.warmup
        }
        chosen: dict[tuple[str, str], tuple[int, int, list[int]]] = {}
        for trial in self.store.trials(self.run_id, status="ok"):
            if trial.variant != plan.variant.name or trial.warmup or not trial.output_token_ids:
                continue
            key = (trial.workload, trial.prompt_id)
            i = index.get((trial.workload, trial.prompt_id, trial.repetition))
            tokens = json.loads(trial.output_token_ids)
            if i is None or not tokens:
                continue
            if key not in chosen or trial.repetition < chosen[key][0]:
                chosen[key] = (trial.repetition, i, tokens)
        return [
            _Stream("output", workload, prompt_id, tokens, 0, trial=i)
            for (workload, prompt_id), (_, i, tokens) in sorted(chosen.items(), key=lambda kv: kv[1][1])
        ]

    def _text_streams(self, ids: Sequence[int], name: str) -> list[_Stream]:
        ctx = self.spec.quality_ctx
        chunks = [list(ids[i : i + ctx]) for i in range(0, len(ids) - ctx + 1, ctx)]
        if not chunks:
            self._note(
                f"quality: {name} has {len(ids)} tokens, fewer than one chunk of quality_ctx = {ctx}: not scored"
            )
        return [
            # llama-perplexity's positions: the tokens ctx/2 + 1 .. ctx - 1, each with half a context of history
            _Stream("text", name, f"chunk {n}", chunk, ctx // 2 + 1)
            for n, chunk in enumerate(chunks)
        ]

    # -- one variant ------------------------------------------------------------------------------

    def _runs(self, name: str, streams: list[_Stream]) -> list[_Stream]:
        """The reference streams ``name`` is scored on: the baseline's outputs of the workloads it
        runs (a workload's ``variants`` key may leave it out of some) and the quality text."""
        workloads = {w.name: w for w in self.spec.workloads}
        return [s for s in streams if s.source != "output" or workloads[s.workload].runs(name)]

    def _score_variant(self, name: str, streams: list[_Stream], scratch: Path) -> None:
        plan = self.plans[name]
        worker = self.worker_for(plan)
        if worker is None:
            self._record(name, "failed", "its worker could not be started again")
            return
        self.report(f"quality: {name} scores the baseline's {len(streams)} streams")
        texts = (
            [self._corpus] if self._corpus is not None and any(s.source == "text" for s in streams) else []
        )
        trial_of = {(t.workload, t.prompt.id): i for i, t in enumerate(plan.trials) if not t.warmup}
        outputs = [s for s in streams if s.source == "output"]
        wanted = [trial_of.get((s.workload, s.prompt_id)) for s in outputs]
        if any(i is None for i in wanted):
            self._record(name, "not scored", "it did not run every prompt the baseline ran")
            return
        encoded = self._encode(worker, [i for i in wanted if i is not None], texts)
        if encoded is None:
            self._record(name, "failed", "its worker did not encode the prompts")
            return
        differ = [
            s.prompt_id for s, ids in zip(outputs, encoded.trials, strict=True) if list(ids) != s.prompt
        ]
        if texts and encoded.texts and streams:
            base_text = [t for s in streams if s.source == "text" for t in s.tokens]
            if list(encoded.texts[0][: len(base_text)]) != base_text:
                differ.append("quality_text")
        if differ:
            self._record(
                name,
                "not scored",
                f"its tokenizer encodes {len(differ)} prompt(s) differently from the baseline's "
                f"({', '.join(differ[:3])}): no position-by-position comparison",
            )
            return
        # a lever that changes the prompt (trimming, compression): the baseline's answer is scored
        # under the prompt the variant sends its model, so its figures show what the cut context cost
        sent = dict(zip((s.prompt_id for s in outputs), encoded.sent or [None] * len(outputs), strict=True))
        streams = [self._as_sent(s, sent.get(s.prompt_id)) if s.source == "output" else s for s in streams]
        results = self._score(worker, streams, scratch, name)
        if isinstance(results, str):
            self._record(name, "failed", results)
            return
        import numpy as np

        rows: list[dict[str, Any]] = []
        methods = set()
        errors = []
        for stream, result in zip(streams, results, strict=True):
            if result.path is None:
                errors.append(result.error or "no scores")
                continue
            assert stream.base_path is not None
            scored = stream.tokens[stream.start :]
            with np.load(stream.base_path) as base, np.load(result.path) as mine:
                figures = position_figures(base, mine, scored)
            Path(result.path).unlink(missing_ok=True)
            methods.add(figures["method"])
            rows += _position_rows(name, stream, scored, figures)
        if not rows:
            unsupported = all(r.unsupported for r in results)
            self._record(
                name, "not scored" if unsupported else "failed", errors[0] if errors else "nothing was scored"
            )
            return
        self.recorder.quality(
            {
                "variant": name,
                "status": "scored",
                "reason": f"{len(errors)} stream(s) not scored: {errors[0]}" if errors else None,
                "method": "top-k" if "top-k" in methods else "full",
                "positions": len(rows),
                "score_ms": sum(r.score_ms or 0 for r in results),
            },
            positions=rows,
        )

    def _as_sent(self, stream: _Stream, sent: list[int] | None) -> _Stream:
        """``stream`` with its prompt replaced by the one the variant sends (``None``: unchanged); the
        answer's tokens and their positions stay the baseline's."""
        if sent is None:
            return stream
        answer = stream.tokens[stream.start :]
        tokens, start = scored_context(sent, answer, self.spec.quality_ctx)
        return dataclasses.replace(stream, tokens=tokens, start=start, position_shift=stream.start - start)

    # -- a lossless variant: its equivalence ------------------------------------------------------

    def _check_variant(self, name: str, reason: str, scratch: Path) -> None:
        """Replay ``name``'s prompts through its own code path (its worker's ``replay``: greedy,
        untimed, traced), then judge every emitted token: the baseline's worker scores prompt + the
        variant's tokens in one pass and through the passes the variant ran, and
        :func:`judge_positions` compares the three (docs/metrics.md, "Equivalence")."""
        plan = self.plans[name]
        unchecked: list[str] = []
        replays, timed, sampled = self._replay_targets(plan)
        fixed = equivalence_shapes(self.spec).get(name)  # the shape its strategy declares
        chunk = fixed.chunk if fixed is not None else 1
        if sampled:
            unchecked.append(f"{sampled} prompt(s) sampled at temperature > 0: sampling is not checked")
        if not replays:
            unchecked.append("no greedy output to replay")
            self._record_check(name, reason, None, unchecked, [])
            return
        worker = self.worker_for(plan)
        if worker is None:
            self._record_check(name, reason, None, [*unchecked, "its worker could not be started again"], [])
            return
        self.report(f"quality: {name} replays {len(replays)} prompt(s) through its own passes (traced)")
        folder = self._folder(scratch)
        items = [{"trial": i, "out": str(folder / f"{n}.npz")} for n, (_, i) in enumerate(replays)]
        results = self._ask(worker, {"replay": items})
        if isinstance(results, str):
            self._record_check(name, reason, None, [*unchecked, f"its replay failed: {results}"], [])
            return
        if results and all(r.unsupported for r in results):
            why = results[0].error or "its session does not trace"
            self._record_check(name, reason, None, [*unchecked, why], [])
            return
        import numpy as np

        rows: list[dict[str, Any]] = []
        passes_run: list[int] = []
        prompts = {(s.workload, s.prompt_id): s.prompt for s in self._baseline_streams}
        for ((workload, prompt_id), _), result in zip(replays, results, strict=True):
            label = f"{workload}/{prompt_id}"
            if result.path is None:
                unchecked.append(f"{label} not replayed: {result.error or 'no answer'}")
                continue
            with np.load(result.path) as data:
                replay = {k: data[k] for k in data.files}
            Path(result.path).unlink(missing_ok=True)
            prompt = [int(t) for t in replay["prompt"]]
            tokens = [int(t) for t in replay["tokens"]]
            known = prompts.get((workload, prompt_id))
            if known is not None and known != prompt:
                unchecked.append(f"{label}: its prompt encodes differently from the baseline's")
                continue
            passes = _passes(replay)
            passes_run.append(len(passes))
            judged = self._judge(prompt, tokens, passes, replay["produced_by"].tolist(), scratch)
            if isinstance(judged, str):
                unchecked.append(f"{label}: {judged}")
                continue
            ref, shaped = judged
            figures = judge_positions(tokens, ref, shaped, replay["logprobs"])
            rows += _judged_rows(
                name, workload, prompt_id, "replay", 0, prompt, tokens, figures, passes, replay
            )
            # the timed outputs of this prompt that differ from the replay's: judged too, on their
            # tokens (their passes were not recorded: each position's floor is the larger of plain
            # decoding's and the strategy's own shape's, :meth:`Strategy.score_shape`)
            for n, other in enumerate(o for o in timed.get((workload, prompt_id), []) if o != tokens):
                shaped = []
                for width in sorted({1, chunk}):
                    passes, produced_by = _chunked(prompt, other, width)
                    judged = self._judge(prompt, other, passes, produced_by, scratch)
                    if isinstance(judged, str):
                        break
                    shaped.append(judged[1])
                if isinstance(judged, str):
                    unchecked.append(f"{label}, a timed output: {judged}")
                    continue
                figures = judge_positions(other, judged[0], shaped)
                rows += _judged_rows(
                    name, workload, prompt_id, "trial", n + 1, prompt, other, figures, None, None
                )
        shape = (
            f"replayed: {len(passes_run)} prompt(s), {sum(passes_run)} forward passes" if passes_run else None
        )
        self._record_check(name, reason, shape, unchecked, rows)

    def _replay_targets(
        self, plan: VariantPlan
    ) -> tuple[list[tuple[tuple[str, str], int]], dict[tuple[str, str], list[list[int]]], int]:
        """The prompts to replay (each with the plan index of its first measured ok greedy trial), the
        distinct greedy outputs each prompt's measured trials gave, and how many prompts only sampled."""
        index = {
            (t.workload, t.prompt.id, t.repetition): i for i, t in enumerate(plan.trials) if not t.warmup
        }
        first: dict[tuple[str, str], tuple[int, int]] = {}
        outputs: dict[tuple[str, str], list[list[int]]] = {}
        sampled: set[tuple[str, str]] = set()
        for trial in self.store.trials(self.run_id, status="ok"):
            if trial.variant != plan.variant.name or trial.warmup:
                continue
            key = (trial.workload, trial.prompt_id)
            if trial.temperature:
                sampled.add(key)
                continue
            i = index.get((trial.workload, trial.prompt_id, trial.repetition))
            if i is None or not trial.output_token_ids:
                continue
            tokens = json.loads(trial.output_token_ids)
            if tokens and tokens not in outputs.setdefault(key, []):
                outputs[key].append(tokens)
            if key not in first or trial.repetition < first[key][0]:
                first[key] = (trial.repetition, i)
        # in the order the trials ran (a prefix cache's reuse follows the order of its prompts)
        targets = sorted(((key, i) for key, (_, i) in first.items()), key=lambda kv: kv[1])
        return targets, outputs, len(sampled - set(first))

    def _judge(
        self,
        prompt: list[int],
        tokens: list[int],
        passes: list[dict[str, Any]],
        produced_by: list[int],
        scratch: Path,
    ) -> tuple[Any, Any] | str:
        """The baseline's log-probabilities for ``tokens`` after ``prompt``: in one pass, and through
        ``passes``. Each distinct stream and each distinct shape of it is scored once, whichever
        variant ran it (identical shapes grouped)."""
        import numpy as np

        stream = prompt + tokens
        key = json.dumps([stream, passes, produced_by])
        one_key = json.dumps(stream)
        missing = []
        if one_key not in self._scored:
            missing.append((one_key, {"tokens": stream, "start": len(prompt)}))
        if key not in self._scored:
            missing.append(
                (key, {"tokens": stream, "start": len(prompt), "passes": passes, "produced_by": produced_by})
            )
        if missing:
            worker = self.worker_for(self.plans[self.spec.baseline_variant])
            if worker is None:
                return "the baseline's worker could not be started again"
            folder = self._folder(scratch)
            items = [dict(item, out=str(folder / f"{n}.npz")) for n, (_, item) in enumerate(missing)]
            results = self._ask(worker, {"score": items})
            if isinstance(results, str):
                return f"the baseline did not score it: {results}"
            for (k, _), result in zip(missing, results, strict=True):
                if result.path is None:
                    return f"the baseline did not score it: {result.error or 'no answer'}"
                with np.load(result.path) as data:
                    if "logprobs" not in data.files:
                        return "the baseline returns no whole distributions"
                    self._scored[k] = data["logprobs"]
                Path(result.path).unlink(missing_ok=True)
        return self._scored[one_key], self._scored[key]

    def _record_check(
        self, name: str, reason: str, shape: str | None, unchecked: list[str], rows: list[dict[str, Any]]
    ) -> None:
        self.recorder.equivalence(
            {
                "variant": name,
                "status": "lossless",
                "reason": reason,
                "method": "full",
                "positions": len(rows),
                "shape": shape,
                "checked": "replay",
                "unchecked": json.dumps(unchecked) if unchecked else None,
            },
            rows,
        )
        for line in unchecked:
            self._note(f"quality: {name} not checked: {line}")

    # -- worker commands --------------------------------------------------------------------------

    def _encode(self, worker: WorkerProcess, trials: list[int], texts: list[str]) -> ev.Encoded | None:
        answer: list[ev.Encoded] = []

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.Encoded):
                answer.append(event)

        outcome = worker.ask({"encode": {"trials": trials, "texts": texts}}, on_event)
        return answer[0] if outcome == "done" and answer else None

    def _score(
        self,
        worker: WorkerProcess,
        streams: list[_Stream],
        scratch: Path,
        name: str,
        chunk: int | None = None,
        prefixes: Sequence[int] = (),
    ) -> list[ev.Scored] | str:
        """Each stream scored by ``worker``: in one pass, or (``chunk``) through a generation's
        passes, after each stream's cached prefix of ``prefixes``."""
        folder = self._folder(scratch)
        items: list[dict[str, Any]] = [
            {"tokens": s.tokens, "start": s.start, "out": str(folder / f"{n}.npz")}
            for n, s in enumerate(streams)
        ]
        if chunk is not None:
            for n, item in enumerate(items):
                item.update(chunk=chunk, prefix=prefixes[n] if prefixes else 0)
        answers: dict[int, ev.Scored] = {}

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.Scored):
                answers[event.item] = event

        outcome = worker.ask({"score": items}, on_event)
        if outcome == "died":
            return worker.death()
        if outcome == "cancelled":
            return "cancelled"
        return [answers.get(n, ev.Scored(item=n, error="no answer")) for n in range(len(items))]

    def _folder(self, scratch: Path) -> Path:
        folder = scratch / f"v{len(list(scratch.iterdir()))}"
        folder.mkdir()
        return folder

    def _ask(self, worker: WorkerProcess, command: dict[str, Any]) -> list[ev.Scored] | str:
        """A ``replay`` or ``score`` command's answers, one per item, in order (or why none came)."""
        (items,) = command.values()
        answers: dict[int, ev.Scored] = {}

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.Scored):
                answers[event.item] = event

        outcome = worker.ask(command, on_event)
        if outcome == "died":
            return worker.death()
        if outcome == "cancelled":
            return "cancelled"
        return [answers.get(n, ev.Scored(item=n, error="no answer")) for n in range(len(items))]

    def _record(self, name: str, status: QualityStatus, reason: str | None) -> None:
        self.recorder.quality({"variant": name, "status": status, "reason": reason})
        if status in ("failed", "not scored"):
            self._note(f"quality: {name} {status}: {reason}")

    def _note(self, message: str) -> None:
        self.notes.append(message)
        self.report(message)


def _chunked(prompt: list[int], tokens: list[int], width: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The passes of a generation of ``tokens`` after ``prompt`` that reads ``width`` tokens per pass
    (1: plain decoding; k + 1: verify passes whose drafts were all taken), and the pass of each token."""
    passes = [{"start": 0, "ids": list(prompt), "cached": 0, "keep": 1}]
    produced_by = [0]
    i = 0  # the output token the next pass starts from
    while len(produced_by) < len(tokens):
        part = tokens[i : i + width]
        passes.append({"start": len(prompt) + i, "ids": part, "cached": 0, "keep": 0})
        produced_by += [len(passes) - 1] * min(len(part), len(tokens) - len(produced_by))
        i += len(part)
    return passes, produced_by


def _passes(replay: dict[str, Any]) -> list[dict[str, Any]]:
    """A replay's recorded passes (its ``.npz`` arrays) as :meth:`Session.score_passes` takes them."""
    out, offset, at = [], 0, 0
    built_len = replay.get("pass_built_len")
    for q, (start, n, cached, keep) in enumerate(
        zip(replay["pass_start"], replay["pass_len"], replay["pass_cached"], replay["pass_keep"], strict=True)
    ):
        ids = [int(t) for t in replay["pass_ids"][offset : offset + n]]
        offset += int(n)
        step = {"start": int(start), "ids": ids, "cached": int(cached), "keep": int(keep)}
        if built_len is not None and int(built_len[q]):
            step["built"] = [int(b) for b in replay["pass_built"][at : at + int(built_len[q])]]
            at += int(built_len[q])
        out.append(step)
    return out


def _judged_rows(
    name: str,
    workload: str,
    prompt_id: str,
    source: str,
    output: int,
    prompt: list[int],
    tokens: list[int],
    figures: dict[str, Any],
    passes: list[dict[str, Any]] | None,
    replay: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """``equivalence_positions`` rows of one judged output (:func:`judge_positions`'s arrays)."""
    own = "own_top" in figures
    rows = []
    for i, token in enumerate(tokens):
        step = passes[int(replay["produced_by"][i])] if passes is not None and replay is not None else None
        rows.append(
            {
                "variant": name,
                "workload": workload,
                "prompt_id": prompt_id,
                "source": source,
                "output": output,
                "position": len(prompt) + i,
                "token_id": int(token),
                "pass_start": step["start"] if step else None,
                "pass_tokens": len(step["ids"]) if step else None,
                "cached": step["cached"] if step else None,
                "base_top_id": int(figures["base_top"][i]),
                "gap": float(figures["gap"][i]),
                "floor_shift": float(figures["floor_shift"][i]),
                "floor_kld": float(figures["floor_kld"][i]),
                "own_top_id": int(figures["own_top"][i]) if own else None,
                "own_gap": float(figures["own_gap"][i]) if own else None,
                "own_shift": float(figures["own_shift"][i]) if own else None,
                "own_kld": float(figures["own_kld"][i]) if own else None,
                "verdict": str(figures["verdict"][i]),
            }
        )
    return rows


def _position_rows(
    name: str, stream: _Stream, scored: Sequence[int], figures: dict[str, Any]
) -> list[dict[str, Any]]:
    """``quality_positions`` rows of one scored stream (:func:`position_figures`'s arrays)."""
    return [
        {
            "variant": name,
            "source": stream.source,
            "workload": stream.workload,
            "prompt_id": stream.prompt_id,
            "position": stream.start + stream.position_shift + offset,
            "token_id": int(scored[offset]),
            "nll_base": float(figures["nll_base"][offset]),
            "nll": float(figures["nll"][offset]),
            "kld": float(figures["kld"][offset]),
            "delta_p": float(figures["delta_p"][offset]),
            "same_top": int(figures["same_top"][offset]),
            "top_id": int(figures["top_id"][offset]),
        }
        for offset in range(len(scored))
    ]
