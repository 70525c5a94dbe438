"""The run's design: in which order, in time, the variants' trials run (docs/analysis.md "How trials
are ordered").

A comparison is only as good as its design. The machine drifts (other programs, frequency and thermal
changes); whatever ran during a slow stretch looks slow. So the variants are not run one after the
other but **interleaved**: every variant is loaded in its own worker at once, and the trials are
dispatched round by round — a round is one (repetition, workload, prompt), which every variant runs
once. Within a round the variants' order follows a balanced Latin square (Williams design) whose
rows go forth and back over the rounds (:func:`row_for_round`): each variant is first equally often
and follows each other variant equally often, so neither position nor carry-over favours one, even
when the machine drifts. Which variant takes which row of the
square is drawn from the spec's seed.

When the variants cannot all be resident (memory), they run in **counterbalanced blocks**: one
variant loaded at a time, in the order A B | B A | A B … over passes of one repetition each (the
design's rows again, reversed every other pass); two passes that end and start with the same variant
share one load. **Sequential** (``order = "sequential"``) is the old order: each variant's trials in
one go.

Variants with ``concurrency`` or ``batch_size`` run each group of trials (:func:`~workbench.run.plan.trial_groups`)
as one unit, dispatched in the round of its first trial. :func:`planned_trials` counts, before the run
starts, every trial its design will record (the progress total).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.run.plan import VariantPlan, trial_groups
from workbench.spec.parse import Spec

__all__ = [
    "Block",
    "Unit",
    "balanced_orders",
    "block_schedule",
    "interleaved_schedule",
    "planned_trials",
    "sequential_schedule",
]


@dataclass(frozen=True)
class Unit:
    """What one worker runs in one command: trials of one variant (indices into its plan's trials)."""

    variant: int  # index into the run's variant plans
    trials: tuple[int, ...]
    round: int | None  # the round of its first trial; None for warm-ups
    repetition: int | None = None  # the repetition of its first trial; None for warm-ups


@dataclass(frozen=True)
class Block:
    """One load of one variant and the units it runs before it is closed (blocks and sequential)."""

    variant: int
    units: tuple[Unit, ...]


def balanced_orders(n: int, seed: int) -> list[tuple[int, ...]]:
    """The rows of a balanced Latin square for ``n`` variants (Williams 1949): ``n`` rows for even
    ``n``, ``2n`` (the square and its mirror) for odd ``n``. In the rows together every variant holds
    every position equally often and immediately follows every other variant equally often. The
    variants are assigned to the square's symbols by a shuffle seeded with ``seed``."""
    if n <= 1:
        return [tuple(range(n))]
    first = [0]
    low, high = 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    symbols = list(range(n))
    random.Random(seed).shuffle(symbols)
    return [tuple(symbols[x] for x in row) for row in rows]


def row_for_round(number: int, rows: int) -> int:
    """The design's row for round ``number``: the rows in order, then in reverse (0 1 | 1 0 | 0 1 …
    for two variants: A B, B A, B A, A B). Cycling them in one direction only would leave a bias
    when the cost of going second grows or shrinks during the run (a drifting machine); the mirror
    cancels that linear trend too."""
    k = number % (2 * rows)
    return k if k < rows else 2 * rows - 1 - k


def _units(plans: Sequence[VariantPlan]) -> tuple[list[list[Unit]], list[list[Unit]]]:
    """Per variant: its warm-up units and its measured units, in plan order."""
    warm: list[list[Unit]] = []
    measured: list[list[Unit]] = []
    for v, plan in enumerate(plans):
        warm.append([])
        measured.append([])
        for group in trial_groups(plan.trials, plan.variant.concurrency, plan.variant.batch_size):
            first = plan.trials[group[0]]
            if first.warmup:
                warm[-1].append(Unit(v, tuple(group), None))
            else:
                measured[-1].append(Unit(v, tuple(group), first.round, first.repetition))
    return warm, measured


def interleaved_schedule(plans: Sequence[VariantPlan], seed: int) -> tuple[list[Unit], list[Unit]]:
    """(warm-ups, rounds): every variant's warm-ups first, then the measured units round by round,
    the variants of each round in the order of the design's row for that round."""
    warm, measured = _units(plans)
    orders = balanced_orders(len(plans), seed)
    by_round: dict[int, dict[int, list[Unit]]] = {}
    for units in measured:
        for unit in units:
            by_round.setdefault(unit.round or 0, {}).setdefault(unit.variant, []).append(unit)
    rounds: list[Unit] = []
    for number, (_, of_round) in enumerate(sorted(by_round.items())):
        for v in orders[row_for_round(number, len(orders))]:
            rounds += of_round.get(v, [])
    return [u for units in warm for u in units], rounds


def block_schedule(plans: Sequence[VariantPlan], seed: int) -> list[Block]:
    """Counterbalanced blocks: pass ``p`` holds every variant's units of repetition ``p``, the
    variants in the design's first row, reversed on odd passes (A B | B A | A B …: a linear drift
    lands on every variant alike over each pair of passes).
    Consecutive blocks of the same variant are merged (one load). Each block starts with that
    variant's warm-ups: a fresh process needs them."""
    warm, measured = _units(plans)
    first = balanced_orders(len(plans), seed)[0]
    passes = sorted({u.repetition or 0 for units in measured for u in units})
    blocks: list[tuple[int, list[Unit]]] = []
    for number, repetition in enumerate(passes):
        row = first[::-1] if number % 2 else first
        for v in row:
            units = [u for u in measured[v] if (u.repetition or 0) == repetition]
            if not units:
                continue
            if blocks and blocks[-1][0] == v:
                blocks[-1][1].extend(units)
            else:
                blocks.append((v, [*warm[v], *units]))
    loaded = {v for v, _ in blocks}
    blocks += [(v, list(warm[v])) for v in range(len(plans)) if v not in loaded and warm[v]]
    return [Block(v, tuple(units)) for v, units in blocks]


def sequential_schedule(plans: Sequence[VariantPlan]) -> list[Block]:
    """Each variant in spec order, its warm-ups and then all its trials: one load each."""
    warm, measured = _units(plans)
    return [Block(v, (*warm[v], *measured[v])) for v in range(len(plans))]


def planned_trials(spec: Spec, plans: Sequence[VariantPlan]) -> int:
    """Every trial the run will record, counted before it starts: the plans' trials, and the warm-ups
    every fresh worker runs again (``workers = "per-repetition"``: each repetition after the first;
    in blocks: each block). ``repetitions = "auto"`` counts up to its cap, and lowers the total when
    it stops."""
    if spec.order == "blocks":
        return sum(len(u.trials) for b in block_schedule(plans, spec.seed) for u in b.units)
    total = sum(len(p.trials) for p in plans)
    if spec.order == "interleaved" and len(plans) > 1 and spec.workers == "per-repetition":
        reps = len({t.repetition for p in plans for t in p.trials if not t.warmup})
        total += sum(t.warmup for p in plans for t in p.trials) * max(0, reps - 1)
    return total
