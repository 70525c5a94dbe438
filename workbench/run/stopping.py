"""When a run stops, and how long it should take: ``repetitions = "auto"`` and its time budget.

With ``repetitions = "auto"`` the executor (:mod:`workbench.run.execute`) asks :class:`AutoRepetitions`
after each repetition that every variant finished whether to stop: once every paired speed-up's CI is
within ±``ci_target`` (after at least AUTO_MIN_REPETITIONS repetitions), or when one more repetition
would end after the ``budget`` (``budget = "5m"``: as long as the last one took). At the cap
(``max_repetitions``) the run ends anyway, with a note saying so. Before a run,
:func:`expected_duration` says how long it should take, from the last run of the same spec.

This module decides and words; the executor acts (stops the designs, lowers the progress total) and
the recorder (:mod:`workbench.run.recording`) writes the notes down.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from workbench.analysis.paired import widest_ci
from workbench.formatting import duration, plus_minus, written_percent
from workbench.spec.parse import AUTO_MIN_REPETITIONS, Spec
from workbench.store import Store

__all__ = ["AutoRepetitions", "Verdict", "expected_duration"]


@dataclass(frozen=True)
class Verdict:
    """What :meth:`AutoRepetitions.after` decided after a repetition every variant finished."""

    #: the widest paired speed-up CI's half-width (a fraction); None when no CI exists yet
    widest: float | None
    #: the run stops here: the note that says why (for the record and the progress line)
    stop: str | None = None
    #: it goes on: the progress line that says so
    going_on: str | None = None
    #: it goes on, but the cap is reached: the note for the run's record
    capped: str | None = None


class AutoRepetitions:
    """``repetitions = "auto"``: after each repetition that every variant finished, stop or go on."""

    def __init__(self, spec: Spec, store: Store) -> None:
        self.spec = spec
        self.store = store
        self._started = time.monotonic()
        #: when each repetition was finished (monotonic seconds), the first entry the run's start
        self._finished_at: list[float] = [self._started]
        self._checked = 0  # the repetition count last looked at

    def start(self) -> None:
        """The run starts now: the budget counts from here."""
        self._started = time.monotonic()
        self._finished_at = [self._started]
        self._checked = 0

    def after(self, run_id: int, done: int) -> Verdict | None:
        """The verdict once ``done`` repetitions are finished by every variant; None when there is
        nothing new to judge (no repetition finished since the last look, or fewer than
        AUTO_MIN_REPETITIONS)."""
        if done == self._checked:
            return None
        now = time.monotonic()
        self._finished_at += [now] * (done - self._checked)
        self._checked = done
        if done < AUTO_MIN_REPETITIONS:
            return None
        spec = self.spec
        widest = widest_ci(self.store.trials(run_id, status="ok"), spec.baseline_variant)
        target = f"target ±{written_percent(spec.ci_target)}"
        elapsed = now - self._started
        if widest is not None and widest <= spec.ci_target:
            return Verdict(
                widest,
                stop=(
                    f'repetitions = "auto": stopped after {done} repetitions in {duration(elapsed)}, every '
                    f"speed-up CI within {plus_minus(widest)} ({target})"
                ),
            )
        width = plus_minus(widest) if widest is not None else "not known yet"
        budget = spec.budget_s
        if budget is not None and done < spec.repetitions:
            last = self._finished_at[-1] - self._finished_at[-2]
            if elapsed + last > budget:
                return Verdict(
                    widest,
                    stop=(
                        f'repetitions = "auto": stopped after {done} repetitions in {duration(elapsed)}: the '
                        f"budget of {duration(budget)} was spent (another repetition takes about "
                        f"{duration(last)}) with the widest speed-up CI {width} ({target})"
                    ),
                )
        capped = None
        if done == spec.repetitions:
            capped = (
                f'repetitions = "auto": reached the cap of {done} repetitions in {duration(elapsed)} with '
                f"a speed-up CI of {width} ({target}; raise max_repetitions)"
            )
        going_on = f"after {done} repetitions the widest speed-up CI is {width} ({target}): adding a round"
        return Verdict(widest, going_on=going_on, capped=capped)


def expected_duration(store: Store, spec: Spec, planned: int) -> tuple[float, str] | None:
    """How long the run should take, before it starts: the last finished run of the same spec (its
    text) in ``store``, its time per trial recorded (warm-ups included) times ``planned``; with
    ``repetitions = "auto"`` (``planned`` is then the cap's) that run's own time. None when there is no
    such run."""
    rows = store.query(
        """
        select r.id, r.started_at, r.finished_at,
          (select count(*) from trials t where t.run_id = r.id) as recorded
        from runs r
        where r.spec = ? and r.status in ('ok', 'partial') and r.finished_at is not null
        order by r.id desc limit 1
        """,
        [spec.text],
    )
    if not rows or not rows[0]["recorded"]:
        return None
    row = rows[0]
    try:
        took = _iso(row["finished_at"]) - _iso(row["started_at"])
    except ValueError:
        return None
    basis = f"run {row['id']} of this spec here took {duration(took)}"
    if spec.auto_repetitions:  # it stops where the last one did, near enough: on the target or the budget
        return took, basis
    return took / row["recorded"] * planned, basis


def _iso(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
