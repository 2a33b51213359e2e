"""The connection pool of one process, and how a database outage looks to the rest of Nodmix.

Stores run their statements synchronously on whatever thread calls them (mostly the event loop,
like the file stores' writes): one statement on a local network is a round trip of about 0.1 ms,
cheaper than a hop to a worker thread. Two rules keep an outage from freezing the gateway:

- every wait is bounded: `connect_timeout` for a new connection, the same for a free pooled
  one, a `statement_timeout` on the server, and TCP keep-alives with `tcp_user_timeout` so a
  silent network drop is noticed in seconds;
- after a failure the database counts as down for one second: calls in that second fail at
  once with `StateUnavailableError` instead of each waiting out a timeout, while the pool
  reconnects in its own threads.

A server restart leaves every pooled connection dead; the first statement on one fails, the
pool then checks the others, and idempotent work (`run`) is tried once more on a fresh one.

Appends and other bookkeeping commit asynchronously (`synchronous_commit = off`): a crashed
replica loses nothing the database acknowledged, and a crashed database server can lose the
last fraction of a second, as files lose unsynced appends in a power cut. Writes that must be
on disk before Nodmix acts on them (`durable`) switch synchronous commit back on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from nodmix.errors import StateUnavailableError
from nodmix.state.extras import require_driver
from nodmix.state.settings import StateSettings, redacted_url

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("nodmix.state")

T = TypeVar("T")
DOWN_SECONDS = 1.0
"""After a failed connection, calls fail at once for this long (the pool reconnects)."""
RECENT_FAILURE_SECONDS = 30.0
STATEMENT_TIMEOUT_MS = 30_000
SERVER_KEEPALIVES = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
)
"""Probes from the server: a silent peer is dropped, its locks freed, within about 11 s."""


class StaleConnection(StateUnavailableError):
    """A pooled connection died under a statement (a server restart); a retry may work."""


class Database:
    """One process's pool of connections to the state database."""

    def __init__(self, settings: StateSettings, *, application_name: str = "nodmix") -> None:
        require_driver()
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        from psycopg_pool import ConnectionPool

        assert settings.url is not None
        _quiet_pool_log()
        self.settings = settings
        self.where = redacted_url(settings.url)
        timeout = settings.connect_timeout
        try:
            given = conninfo_to_dict(settings.url).get("options") or ""
            self.conninfo = make_conninfo(
                settings.url,
                connect_timeout=max(1, round(timeout)),
                application_name=application_name,
                # The server's side of the same keep-alives (the URL's own options win): a
                # replica cut off without a goodbye (a network partition, a host powered off)
                # holds its session and job locks until its server process notices it is
                # gone, after two hours of silence by default.
                options=f"{SERVER_KEEPALIVES} {given}".strip(),
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
                tcp_user_timeout=int(min(timeout, 5.0) * 1000),
            )
        except psycopg.ProgrammingError as exc:
            from nodmix.errors import ConfigError

            raise ConfigError(
                f"not a valid libpq URL: {exc}", file=settings.file, key="state.postgres.url"
            ) from None
        self._operational = (psycopg.OperationalError, psycopg.InterfaceError)
        self.pool = ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=max(2, settings.pool_size),
            open=False,
            timeout=timeout,
            kwargs={"autocommit": True},
            configure=_configure,
            reconnect_timeout=max(30.0, timeout * 6),
            name="nodmix-state",
        )
        self._down_until = 0.0
        self._down_reason = ""
        self._last_failure = float("-inf")
        self._lock = threading.Lock()
        self.closed = False
        self.refusal: str | None = None
        """Set when a newer Nodmix migrated the schema past what this one knows
        (`migrations.check_schema`): every later statement is refused with it."""
        self.closing: list[Callable[[], None]] = []
        """Called (in order) when the pool closes, before its connections go (the writer)."""

    def open(self) -> None:
        """Connect (waiting at most `connect_timeout`).

        Raises:
            StateUnavailableError: the database does not answer or refuses the login.
        """
        from psycopg_pool import PoolTimeout

        try:
            self.pool.open(wait=True, timeout=self.settings.connect_timeout)
        except PoolTimeout:
            reason = self._probe()
            self.pool.close(timeout=0)
            named = f" in {self.settings.file}" if self.settings.file else ""
            raise StateUnavailableError(
                f"cannot reach the state database {self.where} "
                f"(state.postgres.url{named}): {reason}"
            ) from None

    def _probe(self) -> str:
        """Why a direct connection fails (the pool only says it timed out)."""
        import psycopg

        try:
            psycopg.connect(self.conninfo).close()
        except psycopg.Error as exc:
            return first_line(exc)
        return f"no connection within {self.settings.connect_timeout:g}s"

    def close(self) -> None:
        """Close every connection."""
        if not self.closed:
            self.closed = True
            for done in self.closing:
                done()
            self.pool.close(timeout=2.0)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode.

        Raises:
            StateUnavailableError: the database is down (or was a moment ago).
        """
        from psycopg_pool import PoolTimeout

        if self.refusal is not None:
            raise StateUnavailableError(self.refusal)
        now = time.monotonic()
        if self._down_until > now:
            raise StateUnavailableError(self._down_reason)
        # Soon after an outage the pool may hold no connection at all: wait briefly, not the
        # full connect timeout, so a database that is still down costs the caller little.
        recent = now - self._last_failure < RECENT_FAILURE_SECONDS
        wait = min(0.25, self.settings.connect_timeout) if recent else None
        try:
            with self.pool.connection(timeout=wait) as conn:
                yield conn
        except PoolTimeout:
            self._mark_down("no connection available (the database does not answer)")
            raise StateUnavailableError(self._down_reason) from None
        except self._operational as exc:
            self._mark_down(first_line(exc))
            with contextlib.suppress(Exception):
                self.pool.check()  # a restart killed the others too: replace them now
            raise StaleConnection(self._down_reason) from None

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside a transaction (committed when the block ends normally)."""
        with self.connection() as conn, conn.transaction():
            if durable:
                conn.execute("SET LOCAL synchronous_commit = on")
            yield conn

    def run(self, work: Callable[[psycopg.Connection[Any]], T], *, durable: bool = False) -> T:
        """`work(conn)` in a transaction, once more on a fresh connection if the first one
        died under it (only for work that is safe to repeat)."""
        try:
            with self.transaction(durable=durable) as conn:
                return work(conn)
        except StaleConnection:
            self._down_until = 0.0  # one retry: the pool may have fresh connections now
            with self.transaction(durable=durable) as conn:
                return work(conn)

    def query(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work(conn)` of one statement, outside a transaction (autocommit: one round trip
        instead of three, for the reads on a turn's path); retried once like `run`."""
        try:
            with self.connection() as conn:
                return work(conn)
        except StaleConnection:
            self._down_until = 0.0
            with self.connection() as conn:
                return work(conn)

    def retry_now(self) -> None:
        """After a `StaleConnection`, let the next call try a fresh connection at once (the
        pool checked the others) instead of failing for `DOWN_SECONDS`."""
        self._down_until = 0.0

    def _mark_down(self, reason: str) -> None:
        with self._lock:
            self._last_failure = time.monotonic()
            self._down_reason = f"the state database {self.where} is unavailable: {reason}"
            self._down_until = time.monotonic() + DOWN_SECONDS
        log.warning("%s", self._down_reason)

    @property
    def healthy(self) -> bool:
        """False for a moment after a failure."""
        return self._down_until <= time.monotonic()


def _quiet_pool_log() -> None:
    """The pool logs each failed reconnect as a multi-line warning (on a CLI without logging
    set up, straight to stderr, several times before our one-line error); `_mark_down` and
    `open` already say why the database is unavailable, once. Left alone when configured."""
    pool_log = logging.getLogger("psycopg.pool")
    if pool_log.level == logging.NOTSET:
        pool_log.setLevel(logging.ERROR)


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET synchronous_commit = off")
    conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
