"""The worker's untimed commands, beside the timed trials (:mod:`workbench.run.worker`): ``anchor``
(conversation workloads: the baseline answers every conversation before the measured trials) and the
quality pass's ``encode``, ``score`` and ``replay`` (after them: :mod:`workbench.run.quality`). Each
runs in the worker process, on the variant's loaded session, and answers through the worker's events.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from workbench.run import events as ev

__all__ = ["Events", "ReplayProbe", "anchor", "encode", "replay", "score"]


class Events(Protocol):
    """Where a command's answers go: the worker's event stream."""

    def emit(self, event: ev.Event) -> None: ...


def encode(session: Any, trials: list[Any], asked: dict[str, Any], events: Events) -> None:
    """The ``encode`` command (the quality pass): the prompts of the given trials, encoded as their
    timed trials were, each as the session sends it to its model (``Session.sent_prompt``: ``None``
    unless the session changes the prompt), and raw texts."""
    from workbench.core.strategy import Prompt, Request
    from workbench.run.runner import encode_prompt

    encoded, sent = [], []
    for i in asked.get("trials", []):
        plan = trials[int(i)]
        ids = list(encode_prompt(session, plan.prompt))
        encoded.append(ids)
        changed = getattr(session, "sent_prompt", lambda request: None)(
            Request(prompt=plan.prompt, input_ids=tuple(ids), max_new_tokens=plan.max_new_tokens)
        )
        sent.append(None if changed is None or list(changed) == ids else [int(t) for t in changed])
    events.emit(
        ev.Encoded(
            trials=encoded,
            texts=[list(session.encode(Prompt(id="text", prompt=text))) for text in asked.get("texts", [])],
            sent=sent,
        )
    )


def anchor(runner: Any, asked: dict[str, Any], events: Events, cancelled: Any) -> bool:
    """The ``anchor`` command (conversation workloads, untimed, on the baseline's worker before the
    measured trials): each conversation answered turn by turn, greedily, each turn's prompt holding
    the answers before it; one :class:`~workbench.run.events.Anchored` per conversation. False when
    cancelled."""
    from workbench.core.strategy import Prompt
    from workbench.run.plan import TrialPlan
    from workbench.run.runner import encode_prompt
    from workbench.spec.workloads import Conversation, turn_id, turn_messages

    session = runner.session
    workload = str(asked["workload"])
    for raw in asked["conversations"]:
        c = Conversation(str(raw["id"]), str(raw["system"]), tuple(raw["users"]), int(raw["max_new_tokens"]))
        answers: list[str] = []
        history: list[int] = []
        error = None
        for k in range(1, len(c.users) + 1):
            if cancelled():
                return False
            prompt = Prompt(id=turn_id(c.id, k), messages=turn_messages(c, k, answers))
            alone = Prompt(
                id=prompt.id,
                messages=turn_messages(Conversation(c.id, c.system, (c.users[k - 1],), 1), 1, ()),
            )
            plan = TrialPlan(
                workload=workload,
                prompt=prompt,
                repetition=0,
                warmup=True,
                max_new_tokens=c.max_new_tokens,
                temperature=0.0,
                top_p=1.0,
                top_k=0,
                seed=0,
                ignore_eos=False,
                stop=tuple(asked.get("stop", ())),
            )
            result = runner.run(plan)
            if result.status != "ok":
                error = f"turn {k}: {result.record.error or result.status}"
                break
            answers.append(result.record.output_text or "")
            history.append(len(encode_prompt(session, prompt)) - len(encode_prompt(session, alone)))
        events.emit(
            ev.Anchored(
                workload=workload, conversation=c.id, answers=answers, history_tokens=history, error=error
            )
        )
    return True


def score(session: Any, items: list[dict[str, Any]], events: Events, cancelled: Any) -> bool:
    """The ``score`` command (the quality pass, untimed): each item's token sequence scored by
    :meth:`Session.score` (:meth:`Session.score_shaped` for an item with a ``chunk``,
    :meth:`Session.score_passes` for one with a replay's ``passes``), the arrays written to the item's ``out`` file (``.npz``). A session without
    the hook answers every item with the reason. False when cancelled."""
    import numpy as np

    from workbench.core.errors import describe_exception

    for number, item in enumerate(items):
        if cancelled():
            return False
        tokens, start = [int(t) for t in item["tokens"]], int(item["start"])
        t0 = time.perf_counter()
        try:
            if item.get("passes") is not None:  # through a traced replay's recorded passes
                scores = session.score_passes(tokens, start, item["passes"], item["produced_by"])
            elif item.get("chunk") is not None:  # through a generation's forward passes
                scores = session.score_shaped(
                    tokens, start, chunk=int(item["chunk"]), prefix=int(item.get("prefix") or 0)
                )
            else:
                scores = session.score(tokens, start)
            arrays = _score_arrays(scores, len(tokens) - start)
        except NotImplementedError as exc:
            reason = str(exc) or f"{type(session).__name__} cannot score tokens"
            events.emit(ev.Scored(item=number, error=reason, unsupported=True))
            continue
        except Exception as exc:
            events.emit(ev.Scored(item=number, error=describe_exception(exc)))
            continue
        np.savez(item["out"], **arrays)
        events.emit(
            ev.Scored(
                item=number,
                path=item["out"],
                positions=len(tokens) - start,
                method="full" if "logprobs" in arrays else "top-k",
                score_ms=(time.perf_counter() - t0) * 1000,
            )
        )
    return True


class ReplayProbe:
    """The probe of an untimed replay: no clock; it collects the tokens and carries the trace."""

    def __init__(self, cancelled: Any) -> None:
        from workbench.core.strategy import Trace

        self.trace = Trace()
        self.tokens: list[int] = []
        self._cancelled = cancelled

    def step(self, token_ids: Any = (), *, n_tokens: int | None = None, **_: Any) -> None:
        from workbench.core.strategy import Cancelled

        self.tokens.extend(int(t) for t in token_ids)
        if self._cancelled():
            raise Cancelled

    def recount(self, n_tokens: Any) -> None:
        pass

    def mark(self, phase: str) -> None:
        pass

    def end(self) -> None:
        pass


def replay(
    session: Any, trials: list[Any], items: list[dict[str, Any]], events: Events, cancelled: Any
) -> bool:
    """The ``replay`` command (the quality pass's equivalence check, untimed): each item's trial
    generated again, greedily, through the session's own code path with a :class:`Trace` on the probe;
    the prompt, the tokens, the passes and the log-probabilities of each emitted token's pass written
    to the item's ``out`` file (``.npz``). A session that reports no pass answers with the reason
    (``unsupported``). False when cancelled."""
    import numpy as np

    from workbench.core.errors import describe_exception
    from workbench.core.strategy import Cancelled, Request
    from workbench.run.runner import encode_prompt

    for number, item in enumerate(items):
        if cancelled():
            return False
        plan = trials[int(item["trial"])]
        probe = ReplayProbe(cancelled)
        t0 = time.perf_counter()
        try:
            prompt = list(encode_prompt(session, plan.prompt))
            request = Request(
                prompt=plan.prompt,
                input_ids=tuple(prompt),
                max_new_tokens=plan.max_new_tokens,
                temperature=0.0,
                seed=plan.seed,
                ignore_eos=plan.ignore_eos,
                stop=tuple(plan.stop),
            )
            output = session.generate(request, probe)
        except Cancelled:
            return False
        except Exception as exc:
            events.emit(ev.Scored(item=number, error=describe_exception(exc)))
            continue
        trace = probe.trace
        tokens = [int(t) for t in output.token_ids] or probe.tokens
        if not trace.passes or not trace.rows:
            reason = f"{type(session).__name__} does not report its forward passes (Probe.trace)"
            events.emit(ev.Scored(item=number, error=reason, unsupported=True))
            continue
        if trace.tokens != tokens:
            events.emit(
                ev.Scored(
                    item=number,
                    error=f"its trace reports {len(trace.tokens)} emitted tokens that are not its "
                    f"output's {len(tokens)}: a broken trace",
                )
            )
            continue
        passes = trace.passes
        np.savez(
            item["out"],
            prompt=np.asarray(prompt, dtype=np.int64),
            tokens=np.asarray(tokens, dtype=np.int64),
            produced_by=np.asarray(trace.produced_by, dtype=np.int64),
            logprobs=np.stack(trace.rows).astype(np.float32),
            pass_start=np.asarray([p["start"] for p in passes], dtype=np.int64),
            pass_len=np.asarray([len(p["ids"]) for p in passes], dtype=np.int64),
            pass_cached=np.asarray([p["cached"] for p in passes], dtype=np.int64),
            pass_keep=np.asarray([p["keep"] for p in passes], dtype=np.int64),
            pass_ids=np.asarray([t for p in passes for t in p["ids"]], dtype=np.int64),
            pass_built_len=np.asarray([len(p.get("built", ())) for p in passes], dtype=np.int64),
            pass_built=np.asarray([b for p in passes for b in p.get("built", ())], dtype=np.int64),
        )
        events.emit(
            ev.Scored(
                item=number,
                path=item["out"],
                positions=len(tokens),
                method="full",
                score_ms=(time.perf_counter() - t0) * 1000,
            )
        )
    return True


def _score_arrays(scores: Any, n: int) -> dict[str, Any]:
    """The arrays of a :class:`TokenScores`, checked against the ``n`` positions asked for."""
    import numpy as np

    if scores.logprobs is not None:
        logprobs = np.asarray(scores.logprobs, dtype=np.float32)
        if logprobs.ndim != 2 or logprobs.shape[0] != n:
            raise ValueError(f"score() returned logprobs of shape {logprobs.shape}, expected ({n}, vocab)")
        return {"logprobs": logprobs}
    if scores.top_ids is None or scores.top_logprobs is None or scores.token_logprobs is None:
        raise ValueError("score() returned neither logprobs nor top_ids, top_logprobs and token_logprobs")
    arrays: dict[str, Any] = {
        "top_ids": np.asarray(scores.top_ids, dtype=np.int64),
        "top_logprobs": np.asarray(scores.top_logprobs, dtype=np.float32),
        "token_logprobs": np.asarray(scores.token_logprobs, dtype=np.float32),
    }
    if arrays["top_ids"].shape != arrays["top_logprobs"].shape or len(arrays["token_logprobs"]) != n:
        raise ValueError(f"score() returned top-k arrays of the wrong shape for {n} positions")
    return arrays
