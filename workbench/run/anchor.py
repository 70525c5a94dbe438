"""A conversation workload's history, anchored on the baseline's answers before any measured trial.

With ``history = "baseline-anchored"`` every variant's turn k gets the same prompt: the system prompt,
the user messages and the baseline's own answers to the turns before it. Those answers are not in the
workload file; the baseline gives them live (greedy, untimed, in a worker of its own before any
measured trial: the worker's ``anchor`` command, one :class:`~workbench.run.events.Anchored` per
conversation). :class:`Anchoring` asks for them, stores them with the run
(:meth:`~workbench.run.recording.RunRecorder.conversation_turns`) and returns every turn's prompt,
which the executor (:mod:`workbench.run.execute`) plans every variant's turns on
(:func:`~workbench.run.plan.anchor_plans`).
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.core.strategy import Prompt
from workbench.run import events as ev
from workbench.run.recording import RunRecorder
from workbench.run.state import VariantState
from workbench.run.workers import Workers
from workbench.spec.parse import Spec
from workbench.spec.workloads import turn_id, turn_messages

__all__ = ["AnchoredPrompts", "Anchoring"]

#: (workload, turn's prompt id) → (the turn's prompt with its history, the history's tokens)
AnchoredPrompts = dict[tuple[str, str], tuple[Prompt, int | None]]


class Anchoring:
    """Anchor one run's conversations on its baseline. ``prepare_forks(state)`` starts the fork
    server the baseline's later workers come from, ``report`` says what is going on, ``fail`` fails
    the run with the reason, ``cancelled`` says whether the run is cancelled."""

    def __init__(
        self,
        spec: Spec,
        recorder: RunRecorder,
        workers: Workers,
        *,
        prepare_forks: Callable[[VariantState], None],
        report: Callable[[str], None],
        fail: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> None:
        self.spec = spec
        self.recorder = recorder
        self.workers = workers
        self.prepare_forks = prepare_forks
        self.report = report
        self.fail = fail
        self.cancelled = cancelled

    def run(self) -> AnchoredPrompts | None:
        """Conversation workloads: the baseline answers every conversation live (greedy, untimed, in a
        worker of its own before any measured trial), and every variant's turns get those answers as
        history (:func:`~workbench.run.plan.anchor_plans`); the answers are stored with the run. Every
        turn's prompt ({} without a conversation workload); None when the run cannot go on (the
        baseline could not answer, or a cancel)."""
        conversational = [w for w in self.spec.workloads if w.is_conversation]
        if not conversational:
            return {}
        state = next(s for s in self.workers.states if s.plan.variant.name == self.spec.baseline_variant)
        self.report(f"anchoring the conversations: {state.plan.variant.name} answers them (untimed)")
        worker = self.workers.load(state)
        if worker is None:
            if not self.cancelled():
                self.fail(
                    f"the conversations could not be anchored: {state.error or 'the baseline did not load'}"
                )
            return None
        # the baseline's later workers are forked: its fork server imports while this one answers
        self.prepare_forks(state)
        answered: list[ev.Anchored] = []

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.Anchored):
                answered.append(event)
                self.report(f"anchored {event.workload}/{event.conversation}")

        outcome = "done"
        for workload in conversational:
            command = {
                "workload": workload.name,
                "conversations": [c.to_dict() for c in workload.conversations],
                "stop": list(workload.stop),
            }
            self.workers.active = worker
            try:
                outcome = worker.ask({"anchor": command}, on_event)
            finally:
                self.workers.active = None
            if outcome != "done":
                break
        why = worker.death() if outcome == "died" else None
        state.close()  # its measured trials run in a worker that holds the anchored prompts
        if outcome != "done" or self.cancelled():
            if not self.cancelled():
                self.fail(f"the conversations could not be anchored: {why or outcome}")
            return None
        failed = next((a for a in answered if a.error is not None), None)
        if failed is not None:
            self.fail(
                f"the conversations could not be anchored: {failed.workload}/{failed.conversation} "
                f"{failed.error}"
            )
            return None
        self.recorder.conversation_turns(answered)
        by_workload = {w.name: w for w in conversational}
        prompts: AnchoredPrompts = {}
        for a in answered:
            c = next(c for c in by_workload[a.workload].conversations if c.id == a.conversation)
            for k in range(1, len(c.users) + 1):
                prompts[(a.workload, turn_id(c.id, k))] = (
                    Prompt(id=turn_id(c.id, k), messages=turn_messages(c, k, a.answers)),
                    a.history_tokens[k - 1],
                )
        return prompts
