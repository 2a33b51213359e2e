"""Cron jobs, the scheduler's state and the run history in PostgreSQL.

The jobs and the scheduler state are documents (`documents.py`); a job's runs are rows of
`nodmix_cron_runs` keyed by run id (the newest record of a run replaces the older one).
Every scheduled run claims its job's slot in `nodmix_cron_slots` in the same transaction as
its first record: only one replica can ever start the run for one due time, even in the
moment after a failover when the new scheduler and a cut-off old one could both think they
hold the lease. A run's owner is the replica running it; it reads as interrupted once that
replica stopped refreshing its row for a lease period. One run of a job at a time is an
advisory lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from nodmix.automation.history import RunHistory, RunRecord, SlotTaken
from nodmix.automation.jobs import Job, JobError
from nodmix.automation.owners import ProcessMarks
from nodmix.automation.store import JobState, JobStore
from nodmix.state.postgres import documents
from nodmix.state.postgres.locks import AdvisoryLocks, lock_key

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.coordination import PgCoordination
    from nodmix.state.postgres.database import Database

T = TypeVar("T")
NAMESPACE = "automation"
FAILED = "automation.failed"
SCHEDULED = ("schedule", "missed")


class _JobsDoc(msgspec.Struct, kw_only=True):
    version: int = 1
    jobs: list[Job] = []


class _StateDoc(msgspec.Struct, kw_only=True):
    version: int = 1
    jobs: dict[str, JobState] = {}


class PgJobStore(JobStore):
    """`JobStore` on documents: `automation/jobs` and `automation/state`."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    def __init__(self, db: Database, locks: AdvisoryLocks, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.db = db
        self.locks = locks
        self.jobs_path = Path("postgres/automation/jobs")

    def signature(self) -> tuple[int, int, int] | None:
        """Changes with every edit of the jobs (one indexed read)."""
        found = documents.version(self.db, NAMESPACE, "jobs")
        return None if found is None else (found, 0, 0)

    def load(self) -> list[Job]:
        """Every job."""
        found = documents.read(self.db, NAMESPACE, "jobs")
        return _jobs(found[0]) if found and found[0] else []

    def update(self, change: Callable[[list[Job]], T]) -> T:
        """`change(jobs)` under the document's row lock."""

        def apply(current: bytes | None) -> tuple[bytes, T]:
            jobs = _jobs(current) if current else []
            result = change(jobs)
            return msgspec.json.encode(_JobsDoc(jobs=jobs)), result

        result: T = documents.update(self.db, NAMESPACE, "jobs", apply)
        return result

    def load_state(self) -> dict[str, JobState]:
        """The scheduler's state (empty when missing or unreadable)."""
        found = documents.read(self.db, NAMESPACE, "state")
        if not found or not found[0]:
            return {}
        try:
            return msgspec.json.decode(found[0], type=_StateDoc).jobs
        except msgspec.DecodeError:
            return {}

    def write_state(self, data: bytes) -> None:
        """Replace the scheduler's state."""
        documents.write(self.db, NAMESPACE, "state", data)

    @contextlib.contextmanager
    def exclusive(self, job_id: str) -> Iterator[bool]:
        """The job's advisory lock, if no replica holds it."""
        with self.locks.holding(lock_key("cron-job", job_id)) as held:
            yield held

    def failure_reported(self, job_id: str) -> bool:
        """Whether the last failure was reported."""
        return documents.version(self.db, FAILED, job_id) is not None

    def set_failure_reported(self, job_id: str, reported: bool) -> None:
        """Remember (or forget) that a failure was reported."""
        if reported:
            documents.write(self.db, FAILED, job_id, b"1")
        else:
            documents.delete(self.db, FAILED, job_id)


def _jobs(data: bytes) -> list[Job]:
    try:
        return msgspec.json.decode(data, type=_JobsDoc).jobs
    except msgspec.DecodeError as exc:
        raise JobError(f"the cron jobs in the state database are not valid: {exc}") from None


class ReplicaMarks(ProcessMarks):
    """A run's owner is a replica; it is alive while it refreshes its row."""

    def __init__(self, coordination: PgCoordination) -> None:
        super().__init__(Path("postgres/replicas"))
        self._coordination = coordination

    @property
    def token(self) -> str:
        """This replica's id."""
        return self._coordination.replica_id

    def alive(self, token: str | None) -> bool:
        """Whether that replica still refreshes its row."""
        return token is not None and self._coordination.alive(token)

    def sweep(self) -> None:
        """Rows of dead replicas are pruned by the live ones."""

    def close(self) -> None:
        """A clean stop removes this replica's row (`PgCoordination.unregister`)."""


class PgRunHistory(RunHistory):
    """Run records as rows, with a claim per scheduled slot (see the module docs)."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    def __init__(
        self, db: Database, coordination: PgCoordination, state_dir: Path, *, kept: int
    ) -> None:
        super().__init__(state_dir, kept=kept)
        self.db = db
        self.owners = ReplicaMarks(coordination)

    def record(self, run: RunRecord) -> None:
        """Write the run's current state (its first scheduled record claims its slot).

        Raises:
            SlotTaken: another run holds this job's slot already.
        """
        body = self._encoder.encode(run)

        def work(conn: psycopg.Connection[Any]) -> None:
            if run.status == "running" and run.slot is not None and run.trigger in SCHEDULED:
                claimed = conn.execute(
                    "INSERT INTO nodmix_cron_slots (job_id, slot_ms, run_id) VALUES (%s, %s, %s)"
                    " ON CONFLICT (job_id, slot_ms) DO UPDATE SET run_id = EXCLUDED.run_id"
                    " WHERE nodmix_cron_slots.run_id = EXCLUDED.run_id RETURNING 1",
                    (run.job_id, round(run.slot * 1000), run.run_id),
                ).fetchone()
                if claimed is None:
                    raise SlotTaken(run.job_id)
            conn.execute(
                "INSERT INTO nodmix_cron_runs (job_id, run_id, started_at, status, owner, record)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (job_id, run_id) DO UPDATE"
                " SET status = EXCLUDED.status, record = EXCLUDED.record",
                (run.job_id, run.run_id, run.started_at, run.status, run.owner, body),
            )
            if run.status != "running":
                conn.execute(
                    "DELETE FROM nodmix_cron_runs WHERE job_id = %s AND run_id IN ("
                    " SELECT run_id FROM nodmix_cron_runs WHERE job_id = %s"
                    " ORDER BY started_at DESC OFFSET %s)",
                    (run.job_id, run.job_id, self.kept * 2),
                )
                # A slot only matters while a scheduler could still fire it (a failover takes
                # seconds; a missed run is caught up once): a day of claims is plenty.
                conn.execute(
                    "DELETE FROM nodmix_cron_slots WHERE job_id = %s"
                    " AND claimed_at < now() - interval '1 day'",
                    (run.job_id,),
                )

        self.db.run(work, durable=True)

    def _read(self, job_id: str) -> tuple[int, list[RunRecord]]:
        def work(conn: psycopg.Connection[Any]) -> list[bytes]:
            rows = conn.execute(
                "SELECT record FROM nodmix_cron_runs WHERE job_id = %s ORDER BY started_at",
                (job_id,),
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        runs = [self._decoder.decode(raw) for raw in self.db.run(work)]
        return len(runs), sorted(runs, key=lambda r: r.started_at)

    def job_ids(self) -> list[str]:
        """Ids with run records, sorted."""

        def work(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "SELECT DISTINCT job_id FROM nodmix_cron_runs ORDER BY job_id"
            ).fetchall()
            return [str(r[0]) for r in rows]

        return self.db.run(work)
