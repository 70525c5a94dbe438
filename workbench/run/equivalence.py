"""The equivalence check of a lossless variant (docs/metrics.md, "Equivalence"): its prompts replayed
through its own code path (its worker's ``replay``: greedy, untimed, a :class:`~workbench.strategy.Trace`
on the probe recording its target's passes and the log-probabilities each token was chosen from),
every emitted token judged against the baseline's through those passes (:mod:`workbench.run.floor`)
by :func:`~workbench.analysis.equivalence.judge_positions`, stored in ``equivalence_positions``
(its ``quality_variants`` row stays ``lossless``, ``checked = 'replay'``). A part of the quality pass
(:mod:`workbench.run.quality`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.analysis.equivalence import judge_positions
from workbench.core.strategy import ScoreShape
from workbench.run.floor import Floor, chunked
from workbench.run.passcontext import PassContext, ask, folder_in
from workbench.run.plan import VariantPlan

__all__ = ["EquivalenceCheck"]


class EquivalenceCheck:
    """Check the run's lossless variants, each judged against the baseline's ``floor``."""

    def __init__(self, context: PassContext, floor: Floor) -> None:
        self.context = context
        self.floor = floor
        #: the prompts' encodings in the baseline's reference streams, once the reference is scored
        self.baseline_prompts: dict[tuple[str, str], list[int]] = {}

    def check(self, name: str, reason: str, scratch: Path, fixed: ScoreShape | None) -> None:
        """Replay ``name``'s prompts through its own code path (its worker's ``replay``: greedy,
        untimed, traced), then judge every emitted token: the baseline's worker scores prompt + the
        variant's tokens in one pass and through the passes the variant ran, and
        :func:`judge_positions` compares the three (docs/metrics.md, "Equivalence"). ``fixed``: the
        shape its strategy declares (:meth:`Strategy.score_shape`; None when not known)."""
        plan = self.context.plans[name]
        unchecked: list[str] = []
        replays, timed, sampled = self._replay_targets(plan)
        chunk = fixed.chunk if fixed is not None else 1
        if sampled:
            unchecked.append(f"{sampled} prompt(s) sampled at temperature > 0: sampling is not checked")
        if not replays:
            unchecked.append("no greedy output to replay")
            self.record(name, reason, None, unchecked, [])
            return
        worker = self.context.worker_for(plan)
        if worker is None:
            self.record(name, reason, None, [*unchecked, "its worker could not be started again"], [])
            return
        self.context.report(
            f"quality: {name} replays {len(replays)} prompt(s) through its own passes (traced)"
        )
        folder = folder_in(scratch)
        items = [{"trial": i, "out": str(folder / f"{n}.npz")} for n, (_, i) in enumerate(replays)]
        results = ask(worker, {"replay": items})
        if isinstance(results, str):
            self.record(name, reason, None, [*unchecked, f"its replay failed: {results}"], [])
            return
        if results and all(r.unsupported for r in results):
            why = results[0].error or "its session does not trace"
            self.record(name, reason, None, [*unchecked, why], [])
            return
        import numpy as np

        rows: list[dict[str, Any]] = []
        passes_run: list[int] = []
        prompts = self.baseline_prompts
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
            judged = self.floor.judge(prompt, tokens, passes, replay["produced_by"].tolist(), scratch)
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
                    passes, produced_by = chunked(prompt, other, width)
                    judged = self.floor.judge(prompt, other, passes, produced_by, scratch)
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
        self.record(name, reason, shape, unchecked, rows)

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
        for trial in self.context.store.trials(self.context.run_id, status="ok"):
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

    def record(
        self, name: str, reason: str, shape: str | None, unchecked: list[str], rows: list[dict[str, Any]]
    ) -> None:
        self.context.recorder.equivalence(
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
            self.context.note(f"quality: {name} not checked: {line}")


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
