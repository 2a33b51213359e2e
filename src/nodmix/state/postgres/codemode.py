"""Suspended code-mode runs in PostgreSQL, so a `wait` continues a run another replica parked.

Each parked run is a row of `nodmix_codemode_runs` holding the same bytes a run file holds
(`codemode.run_records`: the host state and the VM snapshot, which names its boot template by
digest; every replica of one version reboots the same template). As with files, the engine
is told `waiting` only after the row is written (`saved`), the row is rewritten in the
background when a nested call settles, and a `wait` that resumes the run marks the row
`consumed_by` that call until its result is in the transcript (`recorded`), when the row goes.

Between replicas: a run in this replica's memory is used only while its row still says it is
parked (one indexed read), so a copy another replica resumed meanwhile is never continued
twice; a run this replica never saw is loaded from its row. A row a replica consumed and then
died with (its row in `nodmix_replicas` went stale) is resumed again from the last saved
state, as a restarted process does with a run file. Calls still running on the parking
replica when another one resumes the run are delivered as interrupted (the replica that
parked the run stops writing its row once it is consumed).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.codemode.run_records import RunFileError, decode, detached_run, encode, record_of
from nodmix.codemode.runs import RunNotSaved, RunScope, RunState, RunStore, SuspendedRun
from nodmix.codemode.settings import SUSPENDED_RUN_CAP
from nodmix.errors import StateUnavailableError

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.coordination import PgCoordination
    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.codemode")

ENDED_KEPT_SECONDS = 86400
_scope_encoder = msgspec.json.Encoder()


class PgRunStore(RunStore):
    """A `RunStore` whose parked runs are also rows (see the module docs)."""

    def __init__(
        self,
        db: Database,
        coordination: PgCoordination,
        *,
        cap: int = SUSPENDED_RUN_CAP,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(cap=cap, clock=clock)
        self.db = db
        self.coordination = coordination
        self._lock = threading.Lock()
        self._live: set[str] = set()
        self._written: set[str] = set()
        self._failed: dict[str, str] = {}
        self._generation: dict[str, int] = {}
        self._created: dict[str, float] = {}
        self._consumed: dict[str, str] = {}
        self._writer: ThreadPoolExecutor | None = None

    # ---- the SuspendedRunStore protocol ---------------------------------------------------

    def park(self, state: RunState, snapshot: bytes, reason: str) -> SuspendedRun:
        """Keep the run in memory and start writing its row (`saved` waits for it)."""
        run = super().park(state, snapshot, reason)
        created = self._clock()
        self._created[run.id] = created
        with self._lock:
            self._live.add(run.id)
        self._write_later(run, created)
        state.on_settle = lambda: self._write_later(run, created)
        return run

    async def saved(self, run: SuspendedRun) -> None:
        """Wait until the row is committed (durably), off the event loop."""
        from nodmix.codemode.run_files import _finished, _nothing

        with self._lock:
            if run.id in self._written or run.id not in self._live:
                return
        await _finished(self._submit(_nothing))
        with self._lock:
            if run.id in self._written or run.id not in self._live:
                return
        raise RunNotSaved(self._failed.pop(run.id, "the run was not written to the database"))

    def get(self, run_id: str) -> SuspendedRun | None:
        """The run, if its row still says it is parked (loaded from the row when this replica
        does not hold it in memory)."""
        try:
            row = self.db.run(lambda conn: _parked_row(conn, run_id))
        except StateUnavailableError:
            row = None
            if run_id in self._runs:
                raise
        memory = super().get(run_id)
        if row is None:
            if memory is not None:  # resumed or dropped by another replica
                super().drop(run_id)
                memory.state.on_settle = None
            return None
        data, holder, consumed = row
        if consumed and holder != self.coordination.replica_id and self.coordination.alive(holder):
            return None  # another live replica is resuming it right now
        if memory is not None and not consumed:
            return memory
        try:
            record, snapshot = decode(data)
        except RunFileError as exc:
            log.warning("code-mode run %s in the database is damaged: %s (removed)", run_id, exc)
            self._delete(run_id)
            self.mark_ended(
                run_id, RunScope(agent_id="", session_key="", session_id="", run_id=""), "lost"
            )
            return None
        run = detached_run(record, snapshot, self._clock())
        self._runs[run.id] = run
        self._created[run.id] = record.created_at
        with self._lock:
            self._live.add(run.id)
            self._written.add(run.id)
        run.state.on_settle = lambda: self._write_later(run, record.created_at)
        return run

    def consume(self, run_id: str, call_id: str) -> SuspendedRun | None:
        """Take the run out of memory and mark its row consumed by `call_id`."""
        run = super().drop(run_id)
        if run is None:
            return None
        run.state.on_settle = None
        with self._lock:
            self._live.discard(run_id)  # no background rewrite may bring it back
        self._consumed[call_id] = run_id

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "UPDATE nodmix_codemode_runs SET consumed_by = %s, holder = %s WHERE id = %s",
                (call_id, self.coordination.replica_id, run_id),
            )

        self.db.run(work, durable=True)
        return run

    def recorded(self, call_id: str) -> None:
        """The `wait`'s result is in the transcript: the consumed row goes."""
        run_id = self._consumed.pop(call_id, None)
        if run_id is not None:
            self._delete(run_id)

    def drop(self, run_id: str) -> SuspendedRun | None:
        """Remove the run for good."""
        run = super().drop(run_id)
        if run is not None:
            run.state.on_settle = None
        for call_id in [c for c, r in self._consumed.items() if r == run_id]:
            del self._consumed[call_id]
        self._forget(run_id)
        self._submit(self._delete, run_id)
        return run

    def expire(self) -> list[SuspendedRun]:
        """Sweep runs in memory and rows whose TTL passed (any replica may sweep)."""
        gone = super().expire()
        for run in gone:
            run.state.on_settle = None
            self._forget(run.id)
            self._submit(self._delete, run.id)
        self._submit(self._sweep, self._clock())
        return gone

    def take(self, predicate: Callable[[SuspendedRun], bool]) -> list[SuspendedRun]:
        """Remove matching runs (an aborted turn's), rows included."""
        gone = super().take(predicate)
        for run in gone:
            run.state.on_settle = None
            self._forget(run.id)
            self._submit(self._delete, run.id)
        return gone

    def clear(self) -> list[SuspendedRun]:
        """Shutdown: release the runs in memory, keep their rows for any replica."""
        runs = super().clear()
        for run in runs:
            run.state.on_settle = None
        self._consumed.clear()
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.submit(lambda: None).result(timeout=10)
            writer.shutdown(wait=False)
        return runs

    def ended(self, run_id: str) -> tuple[RunScope, str] | None:
        """Why a run is no longer parked (this replica's memory, else the database)."""
        found = super().ended(run_id)
        if found is not None:
            return found

        def read(conn: psycopg.Connection[Any]) -> tuple[bytes, str] | None:
            row = conn.execute(
                "SELECT scope, reason FROM nodmix_codemode_ended WHERE id = %s", (run_id,)
            ).fetchone()
            return (bytes(row[0]), str(row[1])) if row else None

        try:
            row = self.db.run(read)
        except StateUnavailableError:
            return None
        if row is None:
            return None
        return msgspec.json.decode(row[0], type=RunScope), row[1]

    def mark_ended(self, run_id: str, scope: RunScope, reason: str) -> None:
        """Remember why a run ended, here and for the other replicas."""
        super().mark_ended(run_id, scope, reason)
        self._submit(self._record_end, run_id, _scope_encoder.encode(scope), reason)

    # ---- writing --------------------------------------------------------------------------

    def _write_later(self, run: SuspendedRun, created: float) -> None:
        record = record_of(run, created)
        generation = self._generation.get(run.id, 0) + 1
        self._generation[run.id] = generation
        self._submit(self._write, record, run.snapshot, generation)

    def _write(self, record: Any, snapshot: bytes, generation: int) -> None:
        with self._lock:
            if record.id not in self._live:
                return
            if self._generation.get(record.id) != generation and record.id in self._written:
                return  # a newer capture is queued behind this one
        data = encode(record, snapshot)
        scope = record.scope

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_codemode_runs (id, agent_id, session_key, created_at,"
                " expires_at, holder, data) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, holder = EXCLUDED.holder"
                " WHERE nodmix_codemode_runs.consumed_by IS NULL",
                (
                    record.id,
                    scope.agent_id,
                    scope.session_key,
                    record.created_at,
                    record.expires_at,
                    self.coordination.replica_id,
                    data,
                ),
            )

        try:
            self.db.run(work, durable=True)
        except StateUnavailableError as exc:
            self._failed[record.id] = str(exc)
            log.warning("could not write code-mode run %s: %s", record.id, exc)
            return
        with self._lock:
            if record.id in self._live:
                self._written.add(record.id)

    def _delete(self, run_id: str) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute("DELETE FROM nodmix_codemode_runs WHERE id = %s", (run_id,))

        try:
            self.db.run(work)
        except StateUnavailableError as exc:
            log.warning("could not delete code-mode run %s: %s", run_id, exc)

    def _sweep(self, now: float) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_codemode_ended (id, scope, reason)"
                " SELECT id, convert_to(json_build_object('agent_id', agent_id,"
                " 'session_key', session_key, 'session_id', '', 'run_id', '')::text, 'UTF8'),"
                " 'expired' FROM nodmix_codemode_runs WHERE expires_at <= %s"
                " ON CONFLICT (id) DO NOTHING",
                (now,),
            )
            conn.execute("DELETE FROM nodmix_codemode_runs WHERE expires_at <= %s", (now,))
            conn.execute(
                "DELETE FROM nodmix_codemode_ended WHERE ended_at < now() - %s * interval '1s'",
                (ENDED_KEPT_SECONDS,),
            )

        with contextlib.suppress(StateUnavailableError):
            self.db.run(work)

    def _record_end(self, run_id: str, scope: bytes, reason: str) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_codemode_ended (id, scope, reason) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET reason = EXCLUDED.reason",
                (run_id, scope, reason),
            )

        with contextlib.suppress(StateUnavailableError):
            self.db.run(work)

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._live.discard(run_id)
            self._written.discard(run_id)
            self._generation.pop(run_id, None)
            self._failed.pop(run_id, None)
        self._created.pop(run_id, None)

    def _submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodmix-runs-pg")
        return self._writer.submit(fn, *args)


def _parked_row(conn: psycopg.Connection[Any], run_id: str) -> tuple[bytes, str, bool] | None:
    row = conn.execute(
        "SELECT data, holder, consumed_by IS NOT NULL FROM nodmix_codemode_runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    return (bytes(row[0]), str(row[1] or ""), bool(row[2])) if row else None
