"""A bounded pool of append descriptors, shared by every transcript of a session manager.

A gateway may have thousands of sessions cached, but only the ones written right now need an
open file. Transcripts borrow their `O_APPEND` descriptor from the pool for the length of one
append; the pool keeps the most recently used ones open (at most `limit`) and closes the least
recently used beyond that, so the number of open files never grows with the number of sessions
and a chat session that appends several entries per turn still reuses one descriptor.

A descriptor is never closed while it is lent out (a write on a closed, reused descriptor would
land in another file); if every open descriptor is lent out, the pool briefly goes over its limit
and shrinks back when they are returned.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from nodmix.errors import TranscriptError

DEFAULT_LIMIT = 16
"""Append descriptors kept open per session manager."""

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class DescriptorPool:
    """Open append descriptors, keyed by an owner token, least recently used closed first."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        """Keep at most `limit` descriptors open (at least 1)."""
        self.limit = max(1, limit)
        self._open: OrderedDict[int, int] = OrderedDict()
        self._leased: dict[int, int] = {}
        self._tokens = itertools.count(1)
        # Appends happen on the event loop, but compaction and archiving may run in worker
        # threads; a lock keeps the bookkeeping consistent (uncontended, ~0.1 µs).
        self._lock = threading.Lock()

    def token(self) -> int:
        """A new owner token (one per transcript)."""
        return next(self._tokens)

    @property
    def open_count(self) -> int:
        """How many descriptors are open now."""
        return len(self._open)

    @contextlib.contextmanager
    def lease(self, token: int, path: Path) -> Iterator[int]:
        """The owner's append descriptor for `path`, open until the `with` block ends at least.

        Raises:
            TranscriptError: the file cannot be opened (the `OSError` is its context).
        """
        with self._lock:
            fd = self._open.get(token)
            if fd is None:
                try:
                    fd = os.open(path, _OPEN_FLAGS)
                except OSError as exc:
                    raise TranscriptError(f"{path}: cannot open for append: {exc}") from None
                self._open[token] = fd
            else:
                self._open.move_to_end(token)
            self._leased[token] = self._leased.get(token, 0) + 1
        try:
            yield fd
        finally:
            with self._lock:
                left = self._leased[token] - 1
                if left:
                    self._leased[token] = left
                else:
                    del self._leased[token]
                self._shrink()

    def sync(self, token: int, path: Path) -> None:
        """`fsync` the owner's file (through its open descriptor if it has one).

        Raises:
            TranscriptError: the file cannot be opened or synced.
        """
        try:
            with self.lease(token, path) as fd:
                os.fsync(fd)
        except OSError as exc:
            raise TranscriptError(f"{path}: cannot sync: {exc}") from None

    def close(self, token: int) -> None:
        """Close the owner's descriptor (one lent out stays open until the pool evicts it)."""
        with self._lock:
            if token in self._leased:
                return
            fd = self._open.pop(token, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        """Close every descriptor not lent out."""
        with self._lock:
            idle = [t for t in self._open if t not in self._leased]
            fds = [self._open.pop(t) for t in idle]
        for fd in fds:
            os.close(fd)

    def _shrink(self) -> None:
        # Under the lock: close least recently used idle descriptors beyond the limit.
        if len(self._open) <= self.limit:
            return
        for token in list(self._open):
            if len(self._open) <= self.limit:
                break
            if token not in self._leased:
                os.close(self._open.pop(token))
