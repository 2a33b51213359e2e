"""`FileRunStore`: suspended code-mode runs that survive a restart of the process.

Each parked run is also written to `<state>/codemode/runs/<runId>.run` (0600, see
`run_records` for the format). Parking returns at once: the file is written by one writer
thread (temp file, fsync, rename), so a crash mid-write leaves the old file or none, never a
torn one; and a `wait` that arrives before the write finished finds the run in memory. Files
are deleted on the same thread, in order, so a slow disk never holds up the event loop. The
file is rewritten when a nested call settles, a queued call starts or a guest timer fires
while the run is parked, so that survives too; a call still in flight at a crash is delivered
to the guest as failed (`interrupted by restart`) when the run is resumed, never run again,
while a queued call that never started is queued again and a timer re-armed for what is left
of its delay.

After a restart runs are loaded lazily, on the first `wait` for their id. Startup removes
expired files and leftover temp files, skips (and removes) damaged ones with a warning, and
evicts the oldest runs beyond the caps. The store is bounded by a run count (shared with the
memory store) and by bytes on disk; past either cap a new suspension fails with a clear error.
Completed, failed, aborted and expired runs are deleted from disk.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nodmix.assets.files import ensure_private_dir
from nodmix.codemode.run_records import RunFileError, RunRecord, decode, detached_run, encode
from nodmix.codemode.run_records import record_of as capture
from nodmix.codemode.runs import (
    RunScope,
    RunState,
    RunStore,
    RunStoreFull,
    SuspendedRun,
    SuspendedRunStore,
)
from nodmix.codemode.settings import SUSPENDED_RUN_CAP

log = logging.getLogger("nodmix.codemode")

SUFFIX: Final = ".run"
TEMP_SUFFIX: Final = ".tmp"
DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
"""Bytes of run files on disk before new suspensions are refused."""
FLUSH_TIMEOUT_S: Final = 10.0


@dataclass(slots=True)
class _OnDisk:
    """A run known only from its file (written by an earlier process)."""

    scope: RunScope
    created_at: float
    expires_at: float


class FileRunStore(RunStore):
    """A `RunStore` that also keeps every parked run in a file under `directory`."""

    def __init__(
        self,
        directory: Path,
        *,
        cap: int = SUSPENDED_RUN_CAP,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock` must be wall-clock time: expiry times outlive the process."""
        super().__init__(cap=cap, clock=clock)
        self.directory = directory
        self.max_bytes = max_bytes
        self._on_disk: dict[str, _OnDisk] = {}
        self._sizes: dict[str, int] = {}
        """Bytes of each run's file (written or being written)."""
        self._live: set[str] = set()
        """Runs whose file may (still) be written; guarded by `_lock`."""
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()
        self._writer: ThreadPoolExecutor | None = None
        ensure_private_dir(directory)  # and `codemode/` above it, when missing
        self._scan()

    def __len__(self) -> int:
        return len(self._runs) + len(self._on_disk)

    @property
    def disk_bytes(self) -> int:
        """Bytes of run files on disk (or being written)."""
        return sum(self._sizes.values())

    # ---- the SuspendedRunStore protocol -------------------------------------------------------

    def park(self, state: RunState, snapshot: bytes, reason: str) -> SuspendedRun:
        """Keep the run in memory and write its file in the background."""
        if len(self) >= self._cap:
            raise RunStoreFull
        used = self.disk_bytes
        if used + len(snapshot) > self.max_bytes:
            raise RunStoreFull(
                f"too many suspended code mode runs: they already use {used} bytes on disk "
                f"(limit {self.max_bytes}); finish or abandon some first."
            )
        run = super().park(state, snapshot, reason)
        created = self._clock()
        with self._lock:
            self._live.add(run.id)
        self._sizes[run.id] = len(snapshot)
        self._write_later(run, created)
        state.on_settle = lambda: self._write_later(run, created)
        return run

    def get(self, run_id: str) -> SuspendedRun | None:
        """A run in memory, else one from an earlier process, loaded from its file."""
        run = super().get(run_id)
        if run is not None or run_id not in self._on_disk:
            return run
        info = self._on_disk.pop(run_id)
        path = self._path(run_id)
        try:
            record, snapshot = decode(read_run_file(path, self.max_bytes))
        except (OSError, RunFileError) as exc:
            log.warning("skipping code-mode run file %s: %s (removed)", path, exc)
            self._remove_file(run_id)
            self.mark_ended(run_id, info.scope, "expired")
            return None
        run = detached_run(record, snapshot, self._clock())
        self._runs[run.id] = run
        with self._lock:
            self._live.add(run.id)
        created = record.created_at
        run.state.on_settle = lambda: self._write_later(run, created)
        return run

    def drop(self, run_id: str) -> SuspendedRun | None:
        """Remove the run from memory and its file from disk."""
        run = super().drop(run_id)
        if run is not None:
            run.state.on_settle = None
        self._on_disk.pop(run_id, None)
        self._remove_file(run_id)
        return run

    def expire(self) -> list[SuspendedRun]:
        """Sweep runs in memory and runs known only from their files."""
        gone = super().expire()
        for run in gone:
            run.state.on_settle = None
            self._remove_file(run.id)
        now = self._clock()
        for run_id in [i for i, info in self._on_disk.items() if info.expires_at <= now]:
            info = self._on_disk.pop(run_id)
            self._remove_file(run_id)
            self.mark_ended(run_id, info.scope, "expired")
        return gone

    def take(self, predicate: Callable[[SuspendedRun], bool]) -> list[SuspendedRun]:
        """Remove matching runs (an aborted turn's), files included."""
        gone = super().take(predicate)
        for run in gone:
            run.state.on_settle = None
            self._remove_file(run.id)
        return gone

    def clear(self) -> list[SuspendedRun]:
        """Shutdown: release the runs held in memory but keep their files for the next start
        (their calls in flight will be reported as interrupted); finish pending writes."""
        runs = super().clear()
        for run in runs:
            run.state.on_settle = None
        self.flush()
        return runs

    # ---- writing ------------------------------------------------------------------------------

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
        """Wait until the files of every run parked so far are written."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        done = writer.submit(lambda: None)
        try:
            done.result(timeout=timeout)
        except TimeoutError:
            log.warning("code-mode run files were still being written after %.0f s", timeout)
        writer.shutdown(wait=False)

    def _write_later(self, run: SuspendedRun, created: float) -> None:
        """Capture the run now (on the event loop) and write it on the writer thread."""
        record = capture(run, created)
        generation = self._generation.get(run.id, 0) + 1
        self._generation[run.id] = generation
        self._submit(self._write, record, run.snapshot, generation)

    def _write(self, record: RunRecord, snapshot: bytes, generation: int) -> None:
        if self._generation.get(record.id) != generation:
            return  # a newer capture of this run is queued behind this one
        data = encode(record, snapshot)

        def commit() -> bool:  # under the lock: a run dropped meanwhile is not brought back
            if record.id not in self._live:
                return False
            self._sizes[record.id] = len(data)
            return True

        try:
            write_atomically(self._path(record.id), data, lock=self._lock, commit=commit)
        except OSError as exc:
            log.warning("could not write code-mode run %s to disk: %s", record.id, exc)

    def _remove_file(self, run_id: str) -> None:
        """Forget the run's file: no queued write may commit it any more, and the writer
        thread deletes it (a slow disk never holds up the event loop)."""
        with self._lock:
            self._live.discard(run_id)
            self._generation.pop(run_id, None)
            self._sizes.pop(run_id, None)
        self._submit(self._unlink, self._path(run_id))

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not delete code-mode run file %s: %s", path, exc)

    def _submit(self, fn: Callable[..., None], *args: object) -> None:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodmix-runs")
        self._writer.submit(fn, *args)

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{run_id}{SUFFIX}"

    # ---- startup ------------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index the files an earlier process left: drop temp, damaged and expired ones, and
        the oldest beyond the caps."""
        now = self._clock()
        found: list[tuple[RunRecord, int]] = []
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(TEMP_SUFFIX):
                self._unlink(path)  # a write the process did not finish
                continue
            if not path.name.endswith(SUFFIX):
                continue
            try:
                data = read_run_file(path, self.max_bytes)
                record, _ = decode(data)
                if f"{record.id}{SUFFIX}" != path.name:
                    raise RunFileError("file name does not match the run id")
            except (OSError, RunFileError) as exc:
                log.warning("skipping code-mode run file %s: %s (removed)", path, exc)
                self._unlink(path)  # logs what it cannot remove (a planted directory)
                continue
            if record.expires_at <= now:
                self._unlink(path)
                continue
            found.append((record, len(data)))
        found.sort(key=lambda item: item[0].created_at, reverse=True)  # newest first
        kept_bytes = 0
        for record, size in found:
            if len(self._on_disk) >= self._cap or kept_bytes + size > self.max_bytes:
                log.warning(
                    "evicting code-mode run %s: more suspended runs on disk than the store "
                    "keeps (%d runs, %d bytes)",
                    record.id,
                    self._cap,
                    self.max_bytes,
                )
                self._path(record.id).unlink(missing_ok=True)
                continue
            scope = record.scope
            self._on_disk[record.id] = _OnDisk(
                scope=RunScope(
                    agent_id=scope.agent_id,
                    session_key=scope.session_key,
                    session_id=scope.session_id,
                    run_id=scope.run_id,
                ),
                created_at=record.created_at,
                expires_at=record.expires_at,
            )
            self._sizes[record.id] = size
            kept_bytes += size


def read_run_file(path: Path, limit: int) -> bytes:
    """The bytes of a run file: a regular file (not a link) of at most `limit` bytes.

    Anything else found under a run's name (a pipe, a link to a device, a huge file) is
    refused before it is read, so it can neither block the reader nor fill its memory.

    Raises:
        RunFileError: Not a regular file, or larger than `limit`.
        OSError: It cannot be opened or read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link
            raise RunFileError("not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFileError("not a regular file")
        if info.st_size > limit:
            raise RunFileError(f"larger than the store's byte cap ({limit} bytes)")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise RunFileError(f"larger than the store's byte cap ({limit} bytes)")
    return data


def write_atomically(
    path: Path, data: bytes, *, lock: threading.Lock, commit: Callable[[], bool]
) -> bool:
    """Write `data` to `path` (0600) through a temp file, fsync and rename.

    A crash at any point leaves the old file or none, never a torn one. The directory is not
    fsynced: after a power loss the newest rename may be lost, which leaves the old state
    (the same as a crash just before the write).

    `commit()` runs with `lock` held just before the rename, which happens (under the same
    lock) only if it returns True. Returns whether the file was committed.
    """
    temp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}{TEMP_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        with lock:
            committed = commit()
            if committed:
                os.replace(temp, path)
        if not committed:
            temp.unlink(missing_ok=True)
            return False
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return True


def open_run_store(kind: str, state_dir: Path) -> SuspendedRunStore:
    """The store `tools.codeMode.runStore` selects: `file` (default) or `memory`."""
    if kind == "memory":
        return RunStore()
    return FileRunStore(state_dir / "codemode" / "runs")
