"""`FileRunStore`: suspended code-mode runs that survive a restart of the process.

Each parked run is also written to `<state>/codemode/runs/<runId>.run` (0600, see
`run_records` for the format) by one writer thread (temp file, fsync, rename), so a crash
mid-write leaves the old file or none, never a torn one. The engine awaits that first write
(`saved`) before it returns `waiting`: a run the model was told about is on disk. The file is
rewritten in the background when a nested call settles, a queued call starts or a guest timer
fires while the run is parked, so that survives too; a call still in flight at a crash is
delivered to the guest as failed (`interrupted by restart`) when the run is resumed, never run
again, while a queued call that never started is queued again and a timer re-armed for what is
left of its delay.

A `wait` that resumes a run `consume`s it: the run leaves memory, but its file stays until the
result of that `wait` is `recorded` in the transcript, and is deleted then (at once, on the
event loop: a few microseconds, and the shorter the gap between the two the better). A process
killed while the program continues, or before its result reached the transcript, leaves the
file, so the next `wait` continues the program again from the state the model was told about
(tool calls the lost step had made are made again).

After a restart runs are loaded lazily, on the first `wait` for their id. Startup removes
expired files and leftover temp files, moves damaged ones (or anything else under a run's
name) aside to `damaged/` with one warning naming both paths (they cannot be resumed, and are
kept to be looked at: the newest `DAMAGED_KEEP`), and evicts the oldest runs beyond the caps;
a `wait` for one of those is told it expired, or that it
was lost in the restart (`lost_in_restart`). The store is bounded by a run count (shared with
the memory store) and by bytes on disk; past either cap a new suspension fails with a clear
error. Completed, failed, aborted and expired runs are deleted from disk.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import sniffio

from nodmix.assets.files import ensure_private_dir
from nodmix.codemode.run_io import (
    RUN_SUFFIX,
    TEMP_SUFFIX,
    read_run_file,
    set_aside,
    write_atomically,
)
from nodmix.codemode.run_records import RunFileError, RunRecord, decode, detached_run, encode
from nodmix.codemode.run_records import record_of as capture
from nodmix.codemode.runs import (
    RunNotSaved,
    RunScope,
    RunState,
    RunStore,
    RunStoreFull,
    SuspendedRun,
    SuspendedRunStore,
)
from nodmix.codemode.settings import SUSPENDED_RUN_CAP
from nodmix.stores import provided

__all__ = ["FileRunStore", "open_run_store", "read_run_file", "write_atomically"]

log = logging.getLogger("nodmix.codemode")

SUFFIX: Final = RUN_SUFFIX
DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
"""Bytes of run files on disk before new suspensions are refused."""
FLUSH_TIMEOUT_S: Final = 10.0
UNKNOWN_SCOPE: Final = RunScope(agent_id="", session_key="", session_id="", run_id="")
"""The scope of a run whose damaged file did not say (any session may learn it was lost)."""


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
        self._written: set[str] = set()
        """Live runs whose file has been written at least once; guarded by `_lock`."""
        self._failed: dict[str, str] = {}
        """Why the last write of a run failed."""
        self._consumed: dict[str, tuple[str, float]] = {}
        """`wait` call id -> (run id, expiry) of runs being resumed, files kept until recorded."""
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
        """Keep the run in memory and start writing its file (`saved` waits for it)."""
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

    async def saved(self, run: SuspendedRun) -> None:
        """Wait until the run's file is on disk (fsynced), off the event loop."""
        with self._lock:
            if run.id in self._written or run.id not in self._live:
                return
        await _finished(self._submit(_nothing))  # the writer works in order
        with self._lock:
            if run.id in self._written or run.id not in self._live:
                return
        raise RunNotSaved(self._failed.pop(run.id, "the run file was not written"))

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
            self._forget(run_id)
            set_aside(path, exc)
            self.mark_ended(run_id, info.scope, "lost")
            return None
        run = detached_run(record, snapshot, self._clock())
        self._runs[run.id] = run
        with self._lock:
            self._live.add(run.id)
            self._written.add(run.id)
        created = record.created_at
        run.state.on_settle = lambda: self._write_later(run, created)
        return run

    def consume(self, run_id: str, call_id: str) -> SuspendedRun | None:
        """Take the run out of memory; its file stays until `recorded(call_id)`."""
        run = super().drop(run_id)
        if run is not None:
            run.state.on_settle = None
            self._consumed[call_id] = (run_id, run.expires_at)
        return run

    def recorded(self, call_id: str) -> None:
        """Delete the file of the run `call_id` resumed (now, not on the writer thread)."""
        consumed = self._consumed.pop(call_id, None)
        if consumed is not None:
            self._remove_file(consumed[0], now=True)

    def drop(self, run_id: str) -> SuspendedRun | None:
        """Remove the run from memory and its file from disk."""
        run = super().drop(run_id)
        if run is not None:
            run.state.on_settle = None
        self._on_disk.pop(run_id, None)
        for call_id in [c for c, (r, _) in self._consumed.items() if r == run_id]:
            del self._consumed[call_id]
        self._remove_file(run_id)
        return run

    def expire(self) -> list[SuspendedRun]:
        """Sweep runs in memory, runs known only from their files, and consumed runs whose
        result never reached the transcript."""
        gone = super().expire()
        for run in gone:
            run.state.on_settle = None
            self._remove_file(run.id)
        now = self._clock()
        for run_id in [i for i, info in self._on_disk.items() if info.expires_at <= now]:
            info = self._on_disk.pop(run_id)
            self._remove_file(run_id)
            self.mark_ended(run_id, info.scope, "expired")
        for call_id, (run_id, expires_at) in list(self._consumed.items()):
            if expires_at <= now:
                del self._consumed[call_id]
                self._remove_file(run_id)
        return gone

    def take(self, predicate: Callable[[SuspendedRun], bool]) -> list[SuspendedRun]:
        """Remove matching runs (an aborted turn's), files included."""
        gone = super().take(predicate)
        for run in gone:
            run.state.on_settle = None
            self._remove_file(run.id)
        return gone

    def clear(self) -> list[SuspendedRun]:
        """Shutdown: release the runs held in memory but keep their files (consumed runs'
        too) for the next start, where calls in flight are reported as interrupted; finish
        pending writes."""
        runs = super().clear()
        for run in runs:
            run.state.on_settle = None
        self._consumed.clear()
        self.flush()
        return runs

    # ---- writing ------------------------------------------------------------------------------

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
        """Wait until the files of every run parked so far are written."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        done = writer.submit(_nothing)
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
        with self._lock:
            if self._generation.get(record.id) != generation and record.id in self._written:
                return  # a newer capture of this run is queued behind this one
        data = encode(record, snapshot)

        def commit() -> bool:  # under the lock: a run dropped meanwhile is not brought back
            if record.id not in self._live:
                return False
            self._sizes[record.id] = len(data)
            self._written.add(record.id)
            return True

        try:
            write_atomically(self._path(record.id), data, lock=self._lock, commit=commit)
        except OSError as exc:
            self._failed[record.id] = f"cannot write {self._path(record.id)}: {exc.strerror}"
            log.warning("could not write code-mode run %s to disk: %s", record.id, exc)

    def _remove_file(self, run_id: str, *, now: bool = False) -> None:
        """Forget the run's file: no queued write may commit it any more, and it is deleted
        (`now`, or on the writer thread: a slow disk never holds up the event loop)."""
        self._forget(run_id)
        if now:
            self._unlink(self._path(run_id))
        else:
            self._submit(self._unlink, self._path(run_id))

    def _forget(self, run_id: str) -> None:
        """No queued write may commit the run's file any more."""
        with self._lock:
            self._live.discard(run_id)
            self._written.discard(run_id)
            self._generation.pop(run_id, None)
            self._sizes.pop(run_id, None)
            self._failed.pop(run_id, None)

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not delete code-mode run file %s: %s", path, exc)

    def _submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodmix-runs")
        return self._writer.submit(fn, *args)

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{run_id}{SUFFIX}"

    # ---- startup ------------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index the files an earlier process left: drop temp, damaged and expired ones, and
        the oldest beyond the caps (a `wait` for those learns what happened)."""
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
                set_aside(path, exc)
                self.mark_ended(path.name.removesuffix(SUFFIX), UNKNOWN_SCOPE, "lost")
                continue
            if record.expires_at <= now:
                self._unlink(path)
                self.mark_ended(record.id, _scope(record), "expired")
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
                self.mark_ended(record.id, _scope(record), "lost")
                continue
            self._on_disk[record.id] = _OnDisk(
                scope=_scope(record), created_at=record.created_at, expires_at=record.expires_at
            )
            self._sizes[record.id] = size
            kept_bytes += size


def _scope(record: RunRecord) -> RunScope:
    scope = record.scope
    return RunScope(
        agent_id=scope.agent_id,
        session_key=scope.session_key,
        session_id=scope.session_id,
        run_id=scope.run_id,
    )


def _nothing() -> None:
    """A no-op for the writer thread: once it ran, everything queued before it has."""


async def _finished(future: Future[None]) -> None:
    """Wait for a writer-thread future without blocking the event loop."""
    if sniffio.current_async_library() == "asyncio":
        await asyncio.wrap_future(future)
    else:
        await anyio.to_thread.run_sync(future.result)


def open_run_store(kind: str, state_dir: Path) -> SuspendedRunStore:
    """The store `tools.codeMode.runStore` selects: `file` (default) or `memory`; with a
    shared state backend, `file` means that backend's store."""
    if kind == "memory":
        return RunStore()
    shared: SuspendedRunStore | None = provided(state_dir, "codemode.runs")
    if shared is not None:
        return shared
    return FileRunStore(state_dir / "codemode" / "runs")
