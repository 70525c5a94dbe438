"""Loading what the results view shows, off the UI thread — and off its GIL.

:func:`load_results` reads a run (or two) with its own database connection and analyses it
(medians, bootstrap intervals, phases, the charts' data). That is seconds of Python-heavy work on a
big run, repeated as trials land during a run; in a thread of the GUI process it would compete with
the UI thread for the GIL and make the window stutter. :class:`ResultsLoader` therefore runs it in
one long-lived child process (spawned, not forked: the GUI process has threads), and hands the
result — plain dataclasses, pickled — to a callback. Frozen (packaged) builds, where spawning the
interpreter is not possible, and ``WORKBENCH_GUI_LOADER=thread`` use a thread instead.

The child ends with the GUI: :meth:`ResultsLoader.close` (the window's close) shuts the pool down,
and the interpreter's exit waits for it; should the GUI process be killed outright, the kernel sends
the child SIGTERM (:func:`~workbench.core.lifetime.die_with_parent`, Linux). Ctrl+C in a terminal
reaches the whole process group: the child ignores SIGINT and leaves quitting to the GUI.

No Qt here: the child process imports this module and the analysis, never Qt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.store import TrialRecord

if TYPE_CHECKING:  # imported by the loader (a child process, or the UI thread before it starts)
    from workbench.analysis.compare import RunComparison, TwoRuns
    from workbench.analysis.phases import WorkloadPhase
    from workbench.analysis.run import RunAnalysis
    from workbench.analysis.summary import GroupSummary
    from workbench.analysis.targets import Verdict
    from workbench.charts.base import Chart

__all__ = ["ResultsData", "ResultsLoader", "load_results"]


@dataclass
class ResultsData:
    """What one view of the results shows; the variant names carry ``RUN:`` when two runs are compared."""

    run_ids: tuple[int, ...]
    runs: list[dict[str, Any]]  # the runs rows
    trials: Sequence[TrialRecord]  # warm-ups included (flagged); every status
    summaries: Sequence[GroupSummary]
    baseline: str | None
    failures: Sequence[str] = ()  # variants that crashed or failed to load
    analysis: RunAnalysis | None = None  # one run
    charts: list[Chart] = field(default_factory=list)  # headline first
    two_runs: TwoRuns | None = None  # what `workbench compare A B` reports (two runs)
    verdicts: Sequence[Verdict] = ()  # the experience targets' verdict per variant × workload

    @property
    def comparisons(self) -> list[RunComparison]:
        """Two runs: each variant × workload of RUN_B against RUN_A (matched by name)."""
        return list(self.two_runs.comparisons) if self.two_runs is not None else []

    @property
    def phases(self) -> Sequence[WorkloadPhase]:
        return self.analysis.phases if self.analysis is not None else ()

    @property
    def title(self) -> str:
        if len(self.runs) == 1:
            r = self.runs[0]
            return f"Run {r['id']} — {r['name']} ({r['status']})"
        return "Compare " + " vs ".join(f"run {r['id']} ({r['name']})" for r in self.runs)

    @property
    def running(self) -> bool:
        return any(r["status"] == "running" for r in self.runs)


def load_results(db_path: Path, run_ids: Sequence[int], *, baseline: str | None = None) -> ResultsData:
    """Read the runs and analyse them (medians, bootstrap CIs, speed-ups, phases, the charts' data);
    two runs: their variants side by side and matched by name. Safe in any thread."""
    from workbench import charts as chartdata
    from workbench.analysis.run import analyze_run
    from workbench.store import Store

    store = Store(db_path, create=False)
    try:
        loaded = [store.load_run(run_id) for run_id in run_ids]  # the store is read here, once
        runs = [r.run.to_row() for r in loaded]
        if len(runs) == 1:
            analysis = analyze_run(loaded[0], baseline)
            return ResultsData(
                tuple(run_ids),
                runs,
                sorted([*loaded[0].trials, *loaded[0].warmups], key=lambda t: t.id or 0),
                analysis.summaries,
                analysis.baseline,
                tuple(f"{v.name}: {v.error}" for v in analysis.variants if v.status == "failed" and v.error),
                analysis=analysis,
                charts=chartdata.run_charts(analysis),
                verdicts=analysis.verdicts,
            )
        # each run's rows as it has them alone (`workbench show A`, `show B`), what holds across the runs
        # (`workbench compare A B`), and the two-run charts `compare A B --out` exports too
        view = chartdata.two_runs_view(*loaded)
        return ResultsData(
            tuple(run_ids),
            runs,
            view.side.trials,
            view.side.summaries,
            view.side.baseline,
            view.side.failures,
            charts=chartdata.two_runs_charts(view),
            two_runs=view.two,
            verdicts=view.side.verdicts,
        )
    finally:
        store.close()


def _ready() -> bool:
    """Import every module :func:`load_results` imports: in the child once at start (while the UI
    starts), or in the UI thread before a loader thread exists (see :class:`ResultsLoader`;
    ``tests/test_results_loader.py`` finds any that is missing)."""
    import workbench.analysis.compare
    import workbench.analysis.drafting
    import workbench.analysis.phases
    import workbench.analysis.quality
    import workbench.analysis.roofline
    import workbench.analysis.run
    import workbench.analysis.summary
    import workbench.analysis.targets
    import workbench.analysis.verdict
    import workbench.charts
    import workbench.core.errors
    import workbench.spec.parse
    import workbench.store.db

    workbench.analysis.phases.declared_levers()  # imports the strategy classes (their levers)
    workbench.charts.chart_kinds()  # imports every chart module (the list finds them as it is first read)
    return True


def _child_init(parent_pid: int) -> None:
    """Run in the child as it starts (the pool's initializer)."""
    import signal

    from workbench.core.lifetime import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not die_with_parent(parent_pid):  # the GUI died while this process started
        os._exit(1)


class ResultsLoader:
    """One load at a time is what the window asks for; the pool holds one worker (process or thread).

    A loader *thread* never imports: the modules it needs are imported in the calling (UI) thread
    first, by :meth:`warm_up` or the first :meth:`submit`. Two threads importing at once can deadlock
    in CPython's per-module import locks: a thread importing ``pkg.sub`` holds ``pkg.sub``'s lock
    while it imports ``pkg``, whose ``__init__`` imports a module the other thread is importing, which
    in turn needs ``pkg.sub`` (the packaged viewer once died of it at start: "deadlock detected by
    _ModuleLock('workbench.spec.targets')"). Under one GIL an import in a thread saves the UI thread
    little anyway; the child process, where it does, imports in parallel as before.
    """

    def __init__(self, *, processes: bool | None = None) -> None:
        if processes is None:
            processes = (
                not getattr(sys, "frozen", False) and os.environ.get("WORKBENCH_GUI_LOADER") != "thread"
            )
        self.processes = processes
        self._executor: Executor | None = None

    def _pool(self) -> Executor:
        if self._executor is None:
            if self.processes:
                import multiprocessing

                # started by submit(), from the UI thread: the death signal is tied to the
                # thread that starts the child, and that one lives as long as the process
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_child_init,
                    initargs=(os.getpid(),),
                )
            else:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="results")
        return self._executor

    def warm_up(self) -> None:
        """Start the child's imports now (a process), or import here (a thread), so that the first
        load does not wait for them."""
        if self.processes:
            self._pool().submit(_ready)
        else:
            _ready()  # imported once; after that each import is a lookup in sys.modules

    def submit(self, db_path: Path, run_ids: Sequence[int], done: Callable[[Any], None]) -> None:
        """Load in the worker; ``done`` gets the :class:`ResultsData` or the exception (from a pool
        thread: hand it to the UI thread with a queued signal)."""
        if not self.processes:
            _ready()
        future = self._pool().submit(load_results, db_path, tuple(run_ids))

        def finished(f: Future[Any]) -> None:
            exc = f.exception()
            if isinstance(exc, BrokenProcessPool):  # the worker died: a new one next time
                self._executor = None
            done(exc if exc is not None else f.result())

        future.add_done_callback(finished)

    def close(self) -> None:
        """Stop the worker without waiting: a load in progress finishes, those queued are dropped,
        then the child exits (the interpreter's exit waits for that)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
