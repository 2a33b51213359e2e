"""Where subagent runs are kept: the `SubagentStore` protocol, a memory store (tests, the
fake) and the file store Nodmix uses (`$NODMIX_STATE_DIR/subagents/runs/<runId>.json`).

Each run is one small JSON file, replaced atomically (temporary file, fsync, rename), so a
crash mid-write leaves the old record or the new one. A record that cannot be read (a disk
error, a hand edit) is moved aside as `<name>.corrupt-<time>` and logged; the others load.

`claim(run_id)` gives one process the right to run or report a run: the file store takes an
`flock` on `<runId>.lock`, which the kernel drops when the process dies, so a restarted
gateway can tell a run another live process is finishing from one a dead process left.
Another backend (PostgreSQL) keeps the same seams: records by id and an exclusive claim.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from pathlib import Path
from typing import Protocol

import msgspec

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.stores import provided
from nodmix.subagents.records import RUN_PREFIX, SubagentRun

log = logging.getLogger("nodmix.subagents")

RECORD_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
MAX_RECORD_BYTES = 4 << 20
"""A record holds a task and a reply; anything larger is not ours."""

_decoder = msgspec.json.Decoder(SubagentRun)


class Claim(Protocol):
    """The exclusive right to run (or report) one run until `release()`."""

    def release(self) -> None: ...


class SubagentStore(Protocol):
    """Subagent runs by id, and exclusive claims on them."""

    def save(self, run: SubagentRun) -> None:
        """Write `run` (replacing its earlier record)."""
        ...

    def get(self, run_id: str) -> SubagentRun | None:
        """The record of `run_id`, or None."""
        ...

    def all(self) -> list[SubagentRun]:
        """Every readable record, oldest first."""
        ...

    def remove(self, run_id: str) -> None:
        """Forget a run (nothing happens when it is unknown)."""
        ...

    def claim(self, run_id: str) -> Claim | None:
        """Claim `run_id` for this process; None when another holder has it."""
        ...


class _MemoryClaim:
    def __init__(self, held: set[str], run_id: str) -> None:
        self._held, self._run_id = held, run_id

    def release(self) -> None:
        self._held.discard(self._run_id)


class MemorySubagentStore:
    """A store that lives in this process only (tests; nothing survives a restart)."""

    def __init__(self) -> None:
        self._runs: dict[str, SubagentRun] = {}
        self._claimed: set[str] = set()

    def save(self, run: SubagentRun) -> None:
        self._runs[run.run_id] = run

    def get(self, run_id: str) -> SubagentRun | None:
        return self._runs.get(run_id)

    def all(self) -> list[SubagentRun]:
        return sorted(self._runs.values(), key=lambda r: r.created_at)

    def remove(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def claim(self, run_id: str) -> Claim | None:
        if run_id in self._claimed:
            return None
        self._claimed.add(run_id)
        return _MemoryClaim(self._claimed, run_id)


class _FileClaim:
    def __init__(self, fd: int, path: Path, held: set[str], run_id: str) -> None:
        self._fd, self._path, self._held, self._run_id = fd, path, held, run_id

    def release(self) -> None:
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        self._held.discard(self._run_id)
        with contextlib.suppress(OSError):
            self._path.unlink()  # before unlocking: a waiter then locks a fresh file
        os.close(fd)


class FileSubagentStore:
    """Runs as JSON files under `root` (0700; files 0600)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._ready = False
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def _dir(self) -> Path:
        if not self._ready:
            ensure_private_dir(self.root)
            self._ready = True
        return self.root

    def _path(self, run_id: str, suffix: str = RECORD_SUFFIX) -> Path:
        if not run_id.startswith(RUN_PREFIX) or not run_id[len(RUN_PREFIX) :].isalnum():
            raise ValueError(f"not a subagent run id: {run_id!r}")
        return self._dir() / f"{run_id}{suffix}"

    def save(self, run: SubagentRun) -> None:
        atomic_write(self._path(run.run_id), msgspec.json.encode(run))

    def get(self, run_id: str) -> SubagentRun | None:
        try:
            path = self._path(run_id)
        except ValueError:
            return None
        return self._read(path)

    def all(self) -> list[SubagentRun]:
        if not self.root.is_dir():
            return []
        runs = []
        for path in self._dir().glob(f"{RUN_PREFIX}*{RECORD_SUFFIX}"):
            run = self._read(path)
            if run is not None:
                runs.append(run)
        return sorted(runs, key=lambda r: r.created_at)

    def remove(self, run_id: str) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            self._path(run_id).unlink()

    def claim(self, run_id: str) -> Claim | None:
        path = self._path(run_id, LOCK_SUFFIX)
        with self._lock:  # flock is per open file: two claims in one process must not both win
            if run_id in self._held:
                return None
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return None
                # The holder before us may have unlinked the file between our open and lock.
                try:
                    same = os.stat(path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    self._held.add(run_id)
                    return _FileClaim(fd, path, self._held, run_id)
                os.close(fd)

    def _read(self, path: Path) -> SubagentRun | None:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_RECORD_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read subagent run %s: %s", path, exc)
            return None
        try:
            if len(data) > MAX_RECORD_BYTES:
                raise msgspec.ValidationError(f"larger than {MAX_RECORD_BYTES} bytes")
            return _decoder.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            with contextlib.suppress(OSError):
                os.replace(path, aside)
            log.warning("subagent run %s is unreadable (%s); moved it to %s", path, exc, aside)
            return None


def open_subagent_store(state_dir: Path) -> SubagentStore:
    """The store of the backend serving `state_dir`: files under it by default (the
    directory is created on the first write)."""
    shared: SubagentStore | None = provided(state_dir, "subagents.runs")
    return shared if shared is not None else FileSubagentStore(state_dir / "subagents" / "runs")
