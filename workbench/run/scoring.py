"""The quality pass's scores of the lossy variants: the baseline's reference (its own recorded output
per prompt and chunks of ``quality_text``, scored in full distributions by its worker) and each lossy
variant scoring the same tokens, compared per position by
:func:`~workbench.analysis.quality.position_figures`; stored in ``quality_variants``,
``quality_reference`` and ``quality_positions`` through the run's recorder. A part of the quality pass
(:mod:`workbench.run.quality`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.quality import position_figures, reference_rows
from workbench.run import events as ev
from workbench.run.passcontext import PassContext, ask, folder_in
from workbench.run.plan import VariantPlan
from workbench.run.process import WorkerProcess

__all__ = ["Scoring", "scored_context"]


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


class Scoring:
    """The baseline's reference and the lossy variants' scores of it."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        #: the quality_text, read once by the reference (the baseline and every variant encode it)
        self._corpus: str | None = None

    # -- the baseline's reference ------------------------------------------------------------------

    def reference(self, baseline: str, scratch: Path) -> list[_Stream] | None:
        plan = self.context.plans[baseline]
        streams = self._output_streams(plan)
        if not streams:
            self.context.note(
                "quality: not scored: the baseline has no greedy output to score (no ok trial with token ids)"
            )
            return None
        worker = self.context.worker_for(plan)
        if worker is None:
            self.context.note("quality: not scored: the baseline's worker could not be started again")
            return None
        self.context.report(f"quality: {baseline} scores {len(streams)} reference streams")
        if self.context.spec.quality_text is not None:
            self._corpus = self.context.spec.quality_text.read_text(encoding="utf-8")
        texts = [self._corpus] if self._corpus is not None else []
        encoded = _encode(worker, [s.trial for s in streams if s.trial is not None], texts)
        if encoded is None:
            self.context.note(f"quality: not scored: {baseline}'s worker did not encode the prompts")
            return None
        ctx = self.context.spec.quality_ctx
        for stream, prompt_ids in zip(streams, encoded.trials, strict=True):
            # the context the pass scores in: a prompt + output longer than quality_ctx keeps the
            # prompt's last tokens (at least half a context), as a corpus chunk keeps half a context
            stream.prompt = list(prompt_ids)
            stream.tokens, stream.start = scored_context(stream.prompt, stream.tokens, ctx)
        if texts and self.context.spec.quality_text is not None:
            streams += self._text_streams(encoded.texts[0], self.context.spec.quality_text.name)
        scored = _score(worker, streams, scratch)
        if not isinstance(scored, str):
            if all(r.path is None for r in scored):
                scored = scored[0].error or "nothing was scored"
            elif any(r.method == "top-k" for r in scored):
                scored = (
                    "it returns only a server's top log-probabilities; a reference needs whole distributions"
                )
        if isinstance(scored, str):
            self.context.recorder.quality({"variant": baseline, "status": "not scored", "reason": scored})
            self.context.note(
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
        self.context.recorder.quality(
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
        for trial in self.context.store.trials(self.context.run_id, status="ok"):
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
        ctx = self.context.spec.quality_ctx
        chunks = [list(ids[i : i + ctx]) for i in range(0, len(ids) - ctx + 1, ctx)]
        if not chunks:
            self.context.note(
                f"quality: {name} has {len(ids)} tokens, fewer than one chunk of quality_ctx = {ctx}: not scored"
            )
        return [
            # llama-perplexity's positions: the tokens ctx/2 + 1 .. ctx - 1, each with half a context of history
            _Stream("text", name, f"chunk {n}", chunk, ctx // 2 + 1)
            for n, chunk in enumerate(chunks)
        ]

    # -- one variant ------------------------------------------------------------------------------

    def runs(self, name: str, streams: list[_Stream]) -> list[_Stream]:
        """The reference streams ``name`` is scored on: the baseline's outputs of the workloads it
        runs (a workload's ``variants`` key may leave it out of some) and the quality text."""
        workloads = {w.name: w for w in self.context.spec.workloads}
        return [s for s in streams if s.source != "output" or workloads[s.workload].runs(name)]

    def score_variant(self, name: str, streams: list[_Stream], scratch: Path) -> None:
        plan = self.context.plans[name]
        worker = self.context.worker_for(plan)
        if worker is None:
            self.context.record(name, "failed", "its worker could not be started again")
            return
        self.context.report(f"quality: {name} scores the baseline's {len(streams)} streams")
        texts = (
            [self._corpus] if self._corpus is not None and any(s.source == "text" for s in streams) else []
        )
        trial_of = {(t.workload, t.prompt.id): i for i, t in enumerate(plan.trials) if not t.warmup}
        outputs = [s for s in streams if s.source == "output"]
        wanted = [trial_of.get((s.workload, s.prompt_id)) for s in outputs]
        if any(i is None for i in wanted):
            self.context.record(name, "not scored", "it did not run every prompt the baseline ran")
            return
        encoded = _encode(worker, [i for i in wanted if i is not None], texts)
        if encoded is None:
            self.context.record(name, "failed", "its worker did not encode the prompts")
            return
        differ = [
            s.prompt_id for s, ids in zip(outputs, encoded.trials, strict=True) if list(ids) != s.prompt
        ]
        if texts and encoded.texts and streams:
            base_text = [t for s in streams if s.source == "text" for t in s.tokens]
            if list(encoded.texts[0][: len(base_text)]) != base_text:
                differ.append("quality_text")
        if differ:
            self.context.record(
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
        results = _score(worker, streams, scratch)
        if isinstance(results, str):
            self.context.record(name, "failed", results)
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
            self.context.record(
                name, "not scored" if unsupported else "failed", errors[0] if errors else "nothing was scored"
            )
            return
        self.context.recorder.quality(
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
        tokens, start = scored_context(sent, answer, self.context.spec.quality_ctx)
        return dataclasses.replace(stream, tokens=tokens, start=start, position_shift=stream.start - start)


def _encode(worker: WorkerProcess, trials: list[int], texts: list[str]) -> ev.Encoded | None:
    answer: list[ev.Encoded] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Encoded):
            answer.append(event)

    outcome = worker.ask({"encode": {"trials": trials, "texts": texts}}, on_event)
    return answer[0] if outcome == "done" and answer else None


def _score(worker: WorkerProcess, streams: list[_Stream], scratch: Path) -> list[ev.Scored] | str:
    """Each stream scored by ``worker`` in one pass (:meth:`Session.score`), one answer per stream."""
    folder = folder_in(scratch)
    items: list[dict[str, Any]] = [
        {"tokens": s.tokens, "start": s.start, "out": str(folder / f"{n}.npz")} for n, s in enumerate(streams)
    ]
    return ask(worker, {"score": items})


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
