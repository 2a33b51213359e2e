"""Jobs and their scheduling state under `$NODMIX_STATE_DIR/automation/`.

`jobs.json` holds the definitions (the CLI and the `cron` tool edit it, with or without a
gateway running); `state.json` holds what the scheduler learned (next and last run, whether a
failure was reported). Both are replaced atomically; read-modify-write cycles hold an `flock`
on `jobs.lock`, so two processes never lose each other's edits. The scheduler notices an edit
by the file's stat signature (it polls about once a second).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.automation.jobs import Job, JobError
from nodmix.stores import provided

T = TypeVar("T")
LOCK_TIMEOUT_SECONDS = 10.0


class JobState(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """What the scheduler knows about one job."""

    schedule_key: str = ""
    """The schedule the times below were computed for (an edit resets them)."""
    next_run_at: float | None = None
    last_run_at: float | None = None
    last_status: str | None = None
    last_error: str | None = None
    failure_reported: bool = False


class _JobsFile(msgspec.Struct, kw_only=True):
    version: int = 1
    jobs: list[Job] = []


class _StateFile(msgspec.Struct, kw_only=True):
    version: int = 1
    jobs: dict[str, JobState] = {}


def automation_dir(state_dir: Path) -> Path:
    """`$NODMIX_STATE_DIR/automation`."""
    return state_dir / "automation"


class JobStore:
    """The jobs file and the scheduler state file of one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = automation_dir(state_dir)
        self.jobs_path = self.dir / "jobs.json"
        self.state_path = self.dir / "state.json"
        self._lock_path = self.dir / "jobs.lock"

    # ---- jobs ---------------------------------------------------------------------------

    def signature(self) -> tuple[int, int, int] | None:
        """Changes whenever `jobs.json` is replaced (None: no file)."""
        try:
            st = os.stat(self.jobs_path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def load(self) -> list[Job]:
        """Every job (none when the file does not exist).

        Raises:
            JobError: the file is not a valid jobs file.
        """
        try:
            data = self.jobs_path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return msgspec.json.decode(data, type=_JobsFile).jobs
        except msgspec.DecodeError as exc:
            raise JobError(f"{self.jobs_path}: {exc}") from None

    def get(self, job_id: str) -> Job:
        """One job by id (or unique name).

        Raises:
            JobError: no such job, or the name is ambiguous.
        """
        jobs = self.load()
        for job in jobs:
            if job.id == job_id:
                return job
        named = [job for job in jobs if job.name == job_id]
        if len(named) == 1:
            return named[0]
        if named:
            raise JobError(f"several jobs are named {job_id!r}: use the id")
        raise JobError(f"no cron job {job_id!r} (see: nodmix cron list)")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self.dir)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise JobError(
                            f"{self._lock_path} stayed locked by another process for "
                            f"{LOCK_TIMEOUT_SECONDS:g}s; try again"
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)

    def update(self, change: Callable[[list[Job]], T]) -> T:
        """Run `change(jobs)` on the current list under the lock and save the result."""
        with self._locked():
            jobs = self.load()
            result = change(jobs)
            data = msgspec.json.encode(_JobsFile(jobs=jobs))
            atomic_write(self.jobs_path, msgspec.json.format(data))
            return result

    def add(self, job: Job) -> Job:
        """Save a new job."""
        self.update(lambda jobs: jobs.append(job))
        return job

    def replace(self, job: Job) -> None:
        """Save a changed job (same id).

        Raises:
            JobError: it was removed meanwhile.
        """

        def change(jobs: list[Job]) -> None:
            for i, old in enumerate(jobs):
                if old.id == job.id:
                    jobs[i] = job
                    return
            raise JobError(f"no cron job {job.id!r}")

        self.update(change)

    def remove(self, job_id: str) -> bool:
        """Delete a job; False when it did not exist."""

        def change(jobs: list[Job]) -> bool:
            before = len(jobs)
            jobs[:] = [job for job in jobs if job.id != job_id]
            return len(jobs) != before

        return self.update(change)

    # ---- runs of one job at a time, failures reported -----------------------------------

    @contextlib.contextmanager
    def exclusive(self, job_id: str) -> Iterator[bool]:
        """Hold the job's run lock (`automation/locks/<jobId>.lock`) if free; yields whether
        it is held (a `nodmix cron run` and the gateway exclude each other)."""
        locks = ensure_private_dir(self.dir / "locks")
        fd = os.open(locks / f"{job_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def failure_reported(self, job_id: str) -> bool:
        """Whether the job's last failure was reported (a marker under `failed/`)."""
        return (self.dir / "failed" / job_id).exists()

    def set_failure_reported(self, job_id: str, reported: bool) -> None:
        """Remember (or forget, after a success) that a failure was reported."""
        marker = self.dir / "failed" / job_id
        if reported:
            ensure_private_dir(marker.parent)
            marker.touch()
        else:
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()

    # ---- scheduler state ----------------------------------------------------------------

    def load_state(self) -> dict[str, JobState]:
        """Per-job scheduling state (empty when missing or unreadable: it is recomputed)."""
        try:
            return msgspec.json.decode(self.state_path.read_bytes(), type=_StateFile).jobs
        except (FileNotFoundError, msgspec.DecodeError):
            return {}

    def save_state(self, states: dict[str, JobState]) -> None:
        """Replace the state file."""
        self.write_state(encode_state(states))

    def write_state(self, data: bytes) -> None:
        """Replace the state file with encoded state (`encode_state`)."""
        ensure_private_dir(self.dir)
        atomic_write(self.state_path, data)


def open_job_store(state_dir: Path) -> JobStore:
    """The job store of the state backend serving `state_dir` (files by default)."""
    found = provided(state_dir, "automation.jobs")
    return found if isinstance(found, JobStore) else JobStore(state_dir)


def encode_state(states: dict[str, JobState]) -> bytes:
    """The state file's bytes."""
    return msgspec.json.encode(_StateFile(jobs=states))


def schedule_key(job: Job) -> str:
    """What the state's times depend on."""
    return msgspec.json.encode(job.schedule).decode() + f"@{job.created_at}"
