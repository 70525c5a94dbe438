"""Typed reads and writes over the SQLite results file.

One :class:`Store` = one connection. The process that runs an experiment owns the single write
connection (the worker processes never write; they stream events to it). Readers — the GUI, a
second CLI — open their own connections; WAL lets them read while a run is being written.
Every finished trial is committed in its own transaction together with its steps.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast, get_args

from sqlite_utils import Database

from workbench.core.errors import StoreError
from workbench.core.lifetime import pid_alive as _pid_alive
from workbench.core.literals import RunStatus, TrialStatus
from workbench.store.loaded import (
    EquivalencePositionRecord,
    FloorRecord,
    LoadedRun,
    QualityPositionRecord,
    QualityVariantRecord,
    ReferenceRecord,
    ServerWindowRecord,
    StepTotals,
    accepted_by_variant,
    timeline_candidates,
)
from workbench.store.paths import default_db_path, resolve_db_path
from workbench.store.records import TRIAL_COLUMNS, RunRecord, TrialRecord, VariantRecord
from workbench.store.schema import migrations

__all__ = ["RUN_STATUSES", "Store", "default_db_path", "resolve_db_path"]

RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

#: seconds a write waits for another process's write to end before it fails ("database is locked"):
#: several runs, the GUI and the CLI may write one database at once, each transaction short
BUSY_TIMEOUT_S = 60.0


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class Store:
    """The results database. ``Store(path)`` opens (creating when ``create``) and migrates it."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(
                f"no results database at {self.path} (run `workbench demo` or `workbench run SPEC` first, "
                "or pass --db)"
            )
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a folder, not a results database file")
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder for the results database {self.path}: {exc.strerror}"
                ) from None
        try:
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            self.db = Database(conn)
            # Touch the file: "file is not a database" surfaces here, before anything is written.
            self.db.execute("select count(*) from sqlite_master").fetchall()
            if create:
                self.db.enable_wal()  # the switch waits for another process's lock (the busy timeout)
                self._migrate()
            else:
                self._check_tables()
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from None

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_tables(self) -> None:
        missing = {"runs", "trials", "steps"} - set(self.db.table_names())
        if missing:
            raise StoreError(f"{self.path} is a SQLite file but not a workbench results database")
        # An older schema opened by a newer workbench: migrating adds columns, renames nothing.
        try:
            self._migrate()
        except sqlite3.OperationalError as exc:
            raise _translate(exc, self.path) from None

    def _migrate(self) -> None:
        """Apply the pending migrations, one process at a time: several processes opening a fresh
        (or older) database at once would each find the same migrations pending and apply them twice.
        The check is repeated under the write lock (``BEGIN IMMEDIATE``), so whoever comes second
        finds nothing left to do."""
        if not migrations.pending(self.db):  # the usual case: a read, no lock
            return
        with self._immediate():
            migrations.apply(self.db)  # it asks again what is pending: now under the lock

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        """One write transaction that takes the write lock when it begins (``BEGIN IMMEDIATE``), so
        a write that meets another process's waits for it (the busy timeout). A deferred
        transaction that reads first and writes later cannot wait: when another process wrote in
        between, SQLite refuses it at once with "database is locked". Nested: a savepoint."""
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        conn.commit()

    def _write(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            with self._immediate():
                return fn(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from None

    # -- writes ----------------------------------------------------------------------------------

    def create_run(self, *, name: str, spec_text: str, baseline: str, version: str) -> int:
        row = {
            "name": name,
            "started_at": now_iso(),
            "status": "running",
            "spec": spec_text,
            "environment": "{}",
            "baseline": baseline,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "workbench_version": version,
        }
        return self._write(lambda: self.db.table("runs").insert(row).last_pk)

    def reap_stale_runs(self) -> list[int]:
        """Close runs left ``running`` by a process on this host that no longer exists (a killed CLI,
        a crash, a record its process could not close): ``failed``, with the reason. The trials it
        stored are kept. Returns their ids."""
        host = socket.gethostname()
        stale = []
        for run in self.query("select id, pid from runs where status = 'running' and host = ?", [host]):
            if run["pid"] and not _pid_alive(run["pid"]):
                stale.append((run["id"], run["pid"]))
        for run_id, pid in stale:
            reason = (
                f"its process (pid {pid}) ended without closing the record (killed, or it could not "
                "write it); the trials it stored are kept"
            )
            self._write(
                self.db.execute,
                "update variants set status = 'failed', error = coalesce(error, ?) "
                "where run_id = ? and status in ('pending', 'loaded')",
                [reason, run_id],
            )
            self.finish_run(run_id, "failed", error=reason)
        return [run_id for run_id, _ in stale]

    def set_environment(self, run_id: int, environment: dict[str, Any]) -> None:
        self._write(lambda: self.db.table("runs").update(run_id, {"environment": json.dumps(environment)}))

    def finish_run(self, run_id: int, status: RunStatus, *, error: str | None = None) -> None:
        """The run's final status (and, for a run that failed as a whole, why)."""
        assert status in RUN_STATUSES
        values = {"status": status, "finished_at": now_iso(), "error": error}
        self._write(lambda: self.db.table("runs").update(run_id, values))

    def checkpoint(self) -> None:
        """Move the write-ahead log into the database file and empty it, so that the log can grow
        again from its start (after a write failed on a size limit); never raises."""
        with contextlib.suppress(sqlite3.DatabaseError):
            self.db.execute("pragma wal_checkpoint(truncate)").fetchall()

    def update_run(self, run_id: int, values: dict[str, Any]) -> None:
        self._write(lambda: self.db.table("runs").update(run_id, values))

    def rename_run(self, run_id: int, name: str) -> None:
        self._write(lambda: self.db.table("runs").update(run_id, {"name": name}))

    def add_variant(self, run_id: int, row: dict[str, Any]) -> int:
        data = {"run_id": run_id, "status": "pending", **row}
        if isinstance(data.get("params"), dict):
            data["params"] = json.dumps(data["params"])
        return self._write(lambda: self.db.table("variants").insert(data).last_pk)

    def update_variant(self, run_id: int, name: str, values: dict[str, Any]) -> None:
        def update() -> None:
            sets = ", ".join(f"[{k}] = ?" for k in values)
            self.db.execute(
                f"update variants set {sets} where run_id = ? and name = ?", [*values.values(), run_id, name]
            )

        self._write(update)

    def add_trial(self, run_id: int, trial: TrialRecord, steps: Sequence[dict[str, Any]] = ()) -> int:
        """Insert one trial and its steps in one transaction (committed when this returns). The trial's
        ``id`` and ``run_id`` are the store's: ``run_id`` is this one, the id a new one."""
        row = trial.to_row()
        del row["id"]
        row["run_id"] = run_id

        def insert() -> int:
            trial_id = cast(int, self.db.table("trials").insert(row, alter=False).last_pk)
            if steps:
                self.db.table("steps").insert_all(({"trial_id": trial_id, **s} for s in steps), alter=False)
            return trial_id

        return self._write(insert)

    def add_conversation_turns(self, run_id: int, rows: Sequence[dict[str, Any]]) -> None:
        """The baseline's answers a run's conversation turns were given as history (one row per turn:
        workload, conversation, turn, answer, history_tokens)."""
        self._write(
            lambda: self.db.table("conversation_turns").insert_all(
                ({"run_id": run_id, **row} for row in rows), alter=False
            )
        )

    def conversation_turns(self, run_id: int) -> list[dict[str, Any]]:
        """A run's anchored conversation turns, in order."""
        if "conversation_turns" not in self.db.table_names():
            return []
        return list(
            self.db.query(
                "select workload, conversation, turn, answer, history_tokens from conversation_turns "
                "where run_id = ? order by id",
                [run_id],
            )
        )

    def add_server_metrics(self, run_id: int, row: dict[str, Any]) -> int:
        """One window of a server's own figures; keys without a column go into ``extra`` (JSON)."""
        columns = set(self.db.table("server_metrics").columns_dict)
        data = {k: v for k, v in row.items() if k in columns and k != "extra"}
        extra = {k: v for k, v in row.items() if k not in columns}
        extra.update(row.get("extra") or {})
        data["extra"] = json.dumps(extra) if extra else None
        for key, value in data.items():
            if isinstance(value, list | dict):
                data[key] = json.dumps(value)
        return self._write(lambda: self.db.table("server_metrics").insert({"run_id": run_id, **data}).last_pk)

    def delete_run(self, run_id: int) -> None:
        def delete() -> None:
            self.db.execute(
                "delete from steps where trial_id in (select id from trials where run_id = ?)", [run_id]
            )
            self.db.execute("delete from server_metrics where run_id = ?", [run_id])
            for table in (
                "quality_positions",
                "quality_reference",
                "quality_variants",
                "quality_floor",
                "equivalence_positions",
                "conversation_turns",
            ):
                self.db.execute(f"delete from {table} where run_id = ?", [run_id])
            self.db.execute("delete from trials where run_id = ?", [run_id])
            self.db.execute("delete from variants where run_id = ?", [run_id])
            self.db.execute("delete from runs where id = ?", [run_id])

        self._write(delete)

    def add_quality(
        self,
        run_id: int,
        variant: dict[str, Any],
        *,
        reference: Sequence[dict[str, Any]] = (),
        positions: Sequence[dict[str, Any]] = (),
    ) -> None:
        """One variant's quality-pass outcome (a ``quality_variants`` row) with its per-position rows
        (``quality_positions``; the baseline's: ``quality_reference``), in one transaction."""

        def insert() -> None:
            self.db.table("quality_variants").insert({"run_id": run_id, **variant}, alter=False)
            if reference:
                self.db.table("quality_reference").insert_all(
                    ({"run_id": run_id, **r} for r in reference), alter=False, batch_size=500
                )
            if positions:
                self.db.table("quality_positions").insert_all(
                    ({"run_id": run_id, **p} for p in positions), alter=False, batch_size=500
                )

        self._write(insert)

    def add_equivalence(self, run_id: int, variant: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
        """A lossless variant's equivalence check: its ``quality_variants`` row and its judged
        positions (``equivalence_positions``), in one transaction."""

        def insert() -> None:
            self.db.table("quality_variants").insert({"run_id": run_id, **variant}, alter=False)
            if rows:
                self.db.table("equivalence_positions").insert_all(
                    ({"run_id": run_id, **r} for r in rows), alter=False, batch_size=500
                )

        self._write(insert)

    def equivalence_positions(self, run_id: int) -> list[dict[str, Any]]:
        """The judged positions of the run's lossless variants (empty for runs checked before the
        replay, or not checked)."""
        return self.query("select * from equivalence_positions where run_id = ? order by id", [run_id])

    def quality_floor(self, run_id: int) -> list[dict[str, Any]]:
        """The run's A/A floor rows: written by runs checked before the equivalence check replayed each
        variant (their floor is per judged position in ``equivalence_positions`` now), read for those
        old runs only; empty for any other run."""
        return self.query(
            "select shape, workload, prompt_id, position, kld, top_shift from quality_floor "
            "where run_id = ? order by id",
            [run_id],
        )

    def quality_reference(self, run_id: int, source: str = "output") -> list[dict[str, Any]]:
        """The baseline's reference rows of ``source`` (top-k as little-endian bytes), in order."""
        return self.query(
            "select workload, prompt_id, position, token_id, logprob, top_ids, top_logprobs "
            "from quality_reference where run_id = ? and source = ? order by workload, prompt_id, position",
            [run_id, source],
        )

    def quality_variants(self, run_id: int) -> list[dict[str, Any]]:
        return self.query("select * from quality_variants where run_id = ? order by id", [run_id])

    def quality_positions(self, run_id: int) -> list[dict[str, Any]]:
        """Every scored position of the run's variants (without the baseline's reference rows)."""
        return self.query(
            "select variant, source, workload, prompt_id, position, token_id, nll_base, nll, kld, "
            "delta_p, same_top, top_id from quality_positions where run_id = ? order by id",
            [run_id],
        )

    def set_baseline_comparison(self, updates: Iterable[tuple[int, dict[str, Any]]]) -> None:
        """Per trial id: ``matches_baseline``, ``first_divergence``, ``match_fraction``."""
        rows = [(u["matches_baseline"], u["first_divergence"], u["match_fraction"], i) for i, u in updates]

        def update() -> None:
            self.db.conn.executemany(
                "update trials set matches_baseline = ?, first_divergence = ?, match_fraction = ? where id = ?",
                rows,
            )

        self._write(update)

    # -- reads -----------------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        try:
            return list(self.db.query(sql, params))
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[str], Iterable[tuple[Any, ...]]]:
        """A query's column names and its rows as tuples, streamed (for exports of millions of steps)."""
        cursor = self.db.execute(sql, list(params))
        return [d[0] for d in cursor.description], cursor

    def runs(self) -> list[dict[str, Any]]:
        return self.query(
            """
            select r.id, r.name, r.started_at, r.finished_at, r.status, r.error, r.baseline, r.trial_order,
              (select count(*) from variants v where v.run_id = r.id) as variants,
              (select count(*) from trials t where t.run_id = r.id and t.warmup = 0) as trials,
              (select count(*) from trials t where t.run_id = r.id and t.status = 'failed') as failed
            from runs r order by r.id
            """
        )

    def resolve_run(self, ref: str | int | None) -> dict[str, Any]:
        """A run by id, by exact name (latest with that name), or ``latest``/``None``."""
        if ref is None or str(ref) == "latest":
            rows = self.query("select * from runs order by id desc limit 1")
            if not rows:
                raise StoreError(f"{self.path} holds no runs yet")
            return rows[0]
        text = str(ref)
        if text.isdigit():
            rows = self.query("select * from runs where id = ?", [int(text)])
        else:
            rows = self.query("select * from runs where name = ? order by id desc limit 1", [text])
        if not rows:
            raise StoreError(f"no run {text!r} in {self.path} (see `workbench runs`)")
        return rows[0]

    def variants(self, run_id: int) -> list[dict[str, Any]]:
        return self.query("select * from variants where run_id = ? order by id", [run_id])

    def trials(
        self, run_id: int, *, include_warmup: bool = False, status: TrialStatus | None = None
    ) -> list[TrialRecord]:
        """The run's trials in the order they were recorded (warm-ups only when asked for)."""
        sql = f"select {_TRIAL_SELECT} from trials where run_id = ?"
        params: list[Any] = [run_id]
        if not include_warmup:
            sql += " and warmup = 0"
        if status:
            sql += " and status = ?"
            params.append(status)
        try:
            # the columns selected are the record's fields, in order: positional, no per-row key check
            rows = self.db.execute(sql + " order by id", params)
            return [TrialRecord.from_values(values) for values in rows]
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from None

    def server_metrics(self, run_id: int, *, include_warmup: bool = False) -> list[dict[str, Any]]:
        """The server-side windows of a run (see the ``server_metrics`` table)."""
        sql = "select * from server_metrics where run_id = ?" + ("" if include_warmup else " and warmup = 0")
        return self.query(sql + " order by id", [run_id])

    def steps(self, trial_id: int) -> list[dict[str, Any]]:
        return self.query("select * from steps where trial_id = ? order by idx", [trial_id])

    def step_totals(self, run_id: int) -> dict[int, dict[str, Any]]:
        """Per trial of the run that has sub-timed steps: the sums of ``draft_ms`` and ``verify_ms``."""
        rows = self.query(
            """
            select s.trial_id, sum(s.draft_ms) as draft_ms, sum(s.verify_ms) as verify_ms
            from steps s join trials t on t.id = s.trial_id
            where t.run_id = ? and (s.draft_ms is not null or s.verify_ms is not null)
            group by s.trial_id
            """,
            [run_id],
        )
        return {r["trial_id"]: r for r in rows}

    def draft_steps(self, run_id: int) -> list[tuple[int, int, int, int, float | None, float | None]]:
        """The measured steps of the run's draft → verify loops, as ``(trial id, n_tokens,
        draft_proposed, draft_accepted, draft_ms, verify_ms)``: every step with a sub-split or a draft
        (plain steps of those loops included: they have a ``verify_ms``). Read through the two partial
        indexes of ``m011_step_indexes``, so a run without speculative variants costs nothing."""
        columns = "s.trial_id, s.n_tokens, s.draft_proposed, s.draft_accepted, s.draft_ms, s.verify_ms"
        measured = "t.run_id = ? and t.warmup = 0 and t.status = 'ok'"
        sql = f"""
            select {columns} from steps s join trials t on t.id = s.trial_id
            where {measured} and (s.draft_ms is not null or s.verify_ms is not null)
            union all
            select {columns} from steps s join trials t on t.id = s.trial_id
            where {measured} and s.draft_proposed > 0 and s.draft_ms is null and s.verify_ms is null
        """
        try:
            return [tuple(r) for r in self.db.execute(sql, [run_id, run_id]).fetchall()]
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from None

    def load_run(self, ref: str | int | None) -> LoadedRun:
        """Everything analysis reads of one run (by id, name or ``latest``/``None``), read once: its
        row, variants, trials, server windows, the steps' figures analysis uses, and its quality
        pass's rows (:class:`~workbench.store.loaded.LoadedRun`)."""
        run = RunRecord.from_row(self.resolve_run(ref))
        run_id = run.id
        variants = tuple(VariantRecord.from_row(v) for v in self.variants(run_id))
        every = self.trials(run_id, include_warmup=True)
        trials = tuple(t for t in every if not t.warmup)
        accepted = accepted_by_variant(
            (r["variant"], r["accepted"], r["steps"]) for r in self.accepted_lengths(run_id)
        )
        candidates = timeline_candidates(trials, [v.name for v in variants])
        steps: dict[int, list[tuple[float, int]]] = {i: [] for i in candidates}
        for start in range(0, len(candidates), 500):
            chunk = candidates[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for trial_id, t_ms, n_tokens in self.db.execute(
                f"select trial_id, t_ms, n_tokens from steps where trial_id in ({marks}) order by trial_id, idx",
                chunk,
            ):
                steps[trial_id].append((t_ms, n_tokens))
        return LoadedRun(
            run=run,
            variants=variants,
            trials=trials,
            warmups=tuple(t for t in every if t.warmup),
            server_windows=tuple(ServerWindowRecord.from_row(w) for w in self.server_metrics(run_id)),
            step_totals={
                trial_id: StepTotals(r["draft_ms"], r["verify_ms"])
                for trial_id, r in self.step_totals(run_id).items()
            },
            accepted_lengths=accepted,
            draft_steps=tuple(self.draft_steps(run_id)) if accepted else (),
            steps={i: tuple(s) for i, s in steps.items() if s},
            quality_variants=tuple(QualityVariantRecord.from_row(r) for r in self.quality_variants(run_id)),
            quality_positions=tuple(QualityPositionRecord(**r) for r in self.quality_positions(run_id)),
            quality_floor=tuple(FloorRecord(**r) for r in self.quality_floor(run_id)),
            quality_reference=tuple(ReferenceRecord(**r) for r in self.quality_reference(run_id)),
            equivalence_positions=tuple(
                EquivalencePositionRecord.from_row(r) for r in self.equivalence_positions(run_id)
            ),
        )

    def accepted_lengths(self, run_id: int) -> list[dict[str, Any]]:
        """Per variant and accepted-draft count: how many measured steps verified a draft and accepted
        that many of its tokens (speculative strategies)."""
        return self.query(
            """
            select t.variant, s.draft_accepted as accepted, count(*) as steps
            from steps s join trials t on t.id = s.trial_id
            where t.run_id = ? and t.warmup = 0 and t.status = 'ok' and s.draft_proposed > 0
            group by t.variant, s.draft_accepted order by t.variant, s.draft_accepted
            """,
            [run_id],
        )


_TRIAL_SELECT = ", ".join(f"[{name}]" for name in TRIAL_COLUMNS)


def _translate(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    message = str(exc)
    if "file is not a database" in message or "not a database" in message:
        return StoreError(f"{path} is not a SQLite database")
    if "readonly" in message or "unable to open" in message:
        return StoreError(
            f"cannot write the results database {path}: {message} (check permissions, or pass --db)"
        )
    if "disk I/O error" in message or "disk is full" in message:
        return StoreError(
            f"cannot write the results database {path}: {message} (a full disk, or a file size limit?)"
        )
    if "locked" in message:
        return StoreError(f"the results database {path} is locked by another process: {message}")
    return StoreError(f"results database {path}: {message}")
