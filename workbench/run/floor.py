"""The floor an equivalence check judges a lossless variant's tokens against (docs/metrics.md,
"Equivalence"): the baseline's log-probabilities for the variant's tokens after the prompt, computed
in one pass and through the forward passes the variant ran (a traced replay's, or for a timed output
whose passes were not recorded, plain decoding's and the strategy's own shape's: :func:`chunked`).
What the two differ by is the arithmetic's own rounding in those shapes; the baseline's worker
computes both (its ``score`` command), each distinct stream and shape once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.run.passcontext import PassContext, ask, folder_in

__all__ = ["Floor", "chunked"]


class Floor:
    """The baseline's scores of the streams the pass judges, each computed once whichever variant ran
    it."""

    def __init__(self, context: PassContext) -> None:
        self.context = context
        #: the baseline's log-probabilities of the equivalence check, per stream (one pass) and per
        #: stream × recorded passes: each scored once, whichever variant ran it
        self._scored: dict[str, Any] = {}

    def judge(
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
            context = self.context
            worker = context.worker_for(context.plans[context.spec.baseline_variant])
            if worker is None:
                return "the baseline's worker could not be started again"
            folder = folder_in(scratch)
            items = [dict(item, out=str(folder / f"{n}.npz")) for n, (_, item) in enumerate(missing)]
            results = ask(worker, {"score": items})
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


def chunked(prompt: list[int], tokens: list[int], width: int) -> tuple[list[dict[str, Any]], list[int]]:
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
