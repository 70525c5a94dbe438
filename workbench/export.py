"""Headless export of a run's data: ``trials.csv``, ``steps.csv``, ``server_metrics.csv`` (served
variants) and ``summary.json``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .analysis import summarize
from .errors import WorkbenchError
from .store import Store

__all__ = ["export_data"]


def export_data(store: Store, run_id: int, out_dir: Path) -> list[Path]:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output folder {out_dir}: {exc.strerror}") from None
    run = store.resolve_run(run_id)
    trials = store.trials(run_id, include_warmup=True)
    steps = store.query(
        "select s.* from steps s join trials t on t.id = s.trial_id where t.run_id = ? order by s.trial_id, s.idx",
        [run_id],
    )
    written = [_csv(out_dir / "trials.csv", trials), _csv(out_dir / "steps.csv", steps)]
    windows = store.server_metrics(run_id, include_warmup=True)
    if windows:
        written.append(_csv(out_dir / "server_metrics.csv", windows))
    summary = {
        "run": {k: run[k] for k in ("id", "name", "status", "started_at", "finished_at", "baseline")},
        "environment": json.loads(run["environment"] or "{}"),
        "summary": [s.to_dict() for s in summarize(trials, run["baseline"], windows)],
    }
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    written.append(path)
    return written


def _csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        if rows:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return path
