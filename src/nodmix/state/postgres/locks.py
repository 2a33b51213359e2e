"""Advisory locks of one replica: turns on a session, runs of a cron job, subagent claims.

PostgreSQL session-level advisory locks belong to a connection, and the database drops them
when that connection ends, however the replica died (`kill -9` closes the socket; a network
drop is noticed by TCP keep-alives within seconds). Every lock this replica holds lives on
one dedicated connection, used for a few microseconds per `try`/`unlock`; a lock is never
waited for on the server (that would tie the connection up): a waiter polls with a growing
interval under its own deadline, like the file backend's lock files.

If the lock connection breaks (the database restarted), its locks are gone. The replica
reconnects and takes back every lock it held; one another replica grabbed meanwhile is
reported `lost` (logged) and its holder's writes are fenced by the stores themselves (a
transcript append takes the next free position, so the chain stays linear).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio

from nodmix.errors import StateUnavailableError
from nodmix.state.postgres.database import first_line

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("nodmix.state")

_FIRST_POLL_S = 0.005
_MAX_POLL_S = 0.1


def lock_key(kind: str, name: str) -> int:
    """The 64-bit advisory lock key of a named thing (`session`, `cron-job`, ...)."""
    digest = hashlib.blake2b(f"nodmix:{kind}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks:
    """The advisory locks of this replica, on their own connection."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], where: str) -> None:
        """`connect()` opens a new autocommit connection; `where` names the database."""
        self._connect = connect
        self._where = where
        self._conn: psycopg.Connection[Any] | None = None
        self._mutex = threading.Lock()
        self._held: Counter[int] = Counter()
        self.lost: set[int] = set()
        """Keys this replica held when its lock connection broke and could not take back."""

    def close(self) -> None:
        """Drop the connection (and with it every lock)."""
        with self._mutex:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._conn = None
            self._held.clear()

    def try_lock(self, key: int) -> bool:
        """Take `key` if no other connection holds it (re-entrant within this replica).

        Raises:
            StateUnavailableError: the database cannot be reached.
        """
        with self._mutex:
            row = self._execute("SELECT pg_try_advisory_lock(%s)", key)
            if row:
                self._held[key] += 1
                self.lost.discard(key)
            return bool(row)

    def unlock(self, key: int) -> None:
        """Release one hold of `key` (a broken connection released it already)."""
        with self._mutex:
            if self._held[key] <= 0:
                return
            self._held[key] -= 1
            if self._held[key] == 0:
                del self._held[key]
            try:
                self._execute("SELECT pg_advisory_unlock(%s)", key)
            except StateUnavailableError:
                pass  # the connection is gone, and the lock with it

    def holds(self, key: int) -> bool:
        """Whether this replica holds `key`."""
        return self._held[key] > 0 and key not in self.lost

    def _execute(self, sql: str, key: int) -> Any:
        import psycopg

        for attempt in (0, 1):
            conn = self._connection()
            try:
                row = conn.execute(sql, (key,)).fetchone()
                return row[0] if row else None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._broken(exc)
                if attempt:
                    raise StateUnavailableError(
                        f"the state database {self._where} is unavailable: {first_line(exc)}"
                    ) from None
        return None  # pragma: no cover

    def _connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            raise StateUnavailableError(
                f"the state database {self._where} is unavailable: {first_line(exc)}"
            ) from None
        self._conn = conn
        self._retake(conn)
        return conn

    def _broken(self, exc: BaseException) -> None:
        log.warning("lost the lock connection to %s: %s", self._where, exc)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _retake(self, conn: psycopg.Connection[Any]) -> None:
        """A new connection: take back the locks the broken one held."""
        for key, count in list(self._held.items()):
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row and row[0]:
                for _ in range(count - 1):
                    conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            else:
                self.lost.add(key)
                log.error(
                    "another replica took lock %d while the database connection was down", key
                )

    @contextlib.contextmanager
    def holding(self, key: int) -> Iterator[bool]:
        """Try `key` once; yields whether it is held (released at the end)."""
        got = self.try_lock(key)
        try:
            yield got
        finally:
            if got:
                self.unlock(key)

    @contextlib.contextmanager
    def waiting(self, key: int, *, timeout: float, what: str) -> Iterator[None]:
        """Hold `key` for a short read-modify-write, polling (blocking) up to `timeout`.

        Raises:
            StateUnavailableError: another replica kept it for `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        poll = _FIRST_POLL_S
        while not self.try_lock(key):
            if time.monotonic() >= deadline:
                raise StateUnavailableError(
                    f"{what} stayed locked by another replica for {timeout:g}s"
                )
            time.sleep(poll)
            poll = min(poll * 2, _MAX_POLL_S)
        try:
            yield
        finally:
            self.unlock(key)

    @contextlib.asynccontextmanager
    async def hold(
        self,
        key: int,
        *,
        timeout: float,
        busy: Callable[[], Exception],
        on_wait: Callable[[], None] | None = None,
    ) -> AsyncIterator[None]:
        """Hold `key` for the block, polling for it at most `timeout` seconds.

        Raises:
            Exception: `busy()` when the deadline passed.
            StateUnavailableError: the database cannot be reached.
        """
        deadline = time.monotonic() + timeout
        poll = _FIRST_POLL_S
        told = False
        while not self.try_lock(key):
            now = time.monotonic()
            if now >= deadline:
                raise busy()
            if not told and on_wait is not None:
                on_wait()
                told = True
            await anyio.sleep(min(poll, deadline - now))
            poll = min(poll * 2, _MAX_POLL_S)
        try:
            yield
        finally:
            self.unlock(key)
