"""Replicas, singleton leases and cross-replica events in PostgreSQL (`PgCoordination`).

- Every replica has a row in `nodmix_replicas`, refreshed every third of `leaseSeconds`; a
  clean stop removes it, and a row not refreshed for a lease period belongs to a dead replica
  (its cron runs read as interrupted, `nodmix status` leaves it out).
- A singleton runs on the replica holding its row in `nodmix_leases`. Taking it is one
  statement that succeeds only when the lease expired or is free; the holder renews it every
  third of the lease and stops the singleton itself when it could not renew before its own
  conservative deadline (the renewal's start plus the lease, less a margin), so two replicas
  never run it at once even when the holder is cut off from the database. Another replica
  takes over at most a lease (plus one poll) after the holder died; a clean stop releases the
  lease and wakes the others through NOTIFY at once.
- Each heartbeat also checks the schema version (`migrations.check_schema`): a replica left
  running after a newer Nodmix migrated the database stops writing to it.
- Events go out with `NOTIFY nodmix_events` (payloads over 7 kB through `nodmix_events`, read
  back by id) and come in on one LISTEN connection per replica, reconnected after an outage.
  Delivery is at most once: a replica cut off from the database misses what was sent
  meanwhile (clients reload the session when they reconnect).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from nodmix import __version__
from nodmix.coordination import Listener, deliver
from nodmix.errors import StateUnavailableError
from nodmix.state.postgres.migrations import check_schema

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")

EVENTS_CHANNEL = "nodmix_events"
LEASES_CHANNEL = "nodmix_leases"
NOTIFY_LIMIT = 7000
"""Payload bytes sent inline; larger events go through `nodmix_events`."""
EVENTS_KEPT_SECONDS = 300


class PgCoordination:
    """Leases, replicas and events of one replica (see the module docs)."""

    def __init__(self, db: Database, *, replica_id: str, lease_seconds: float) -> None:
        self.db = db
        self.replica_id = replica_id
        self.lease_seconds = lease_seconds
        self.url: str | None = None
        """The gateway's URL, once it listens (shown by `nodmix status`)."""
        self._listeners: list[Listener] = []
        self._held: dict[str, int] = {}
        self._wake = anyio.Event()
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._outbox_ready = anyio.Event()
        self.listening = False

    @property
    def renew_every(self) -> float:
        """Seconds between renewals (and replica heartbeats)."""
        return max(0.2, self.lease_seconds / 3)

    @property
    def poll_every(self) -> float:
        """Seconds between attempts to take a singleton someone else holds."""
        return min(1.0, max(0.1, self.lease_seconds / 5))

    # ---- replicas ---------------------------------------------------------------------------

    def register(self) -> None:
        """Add (or refresh) this replica's row."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_replicas (id, host, pid, url, version)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE"
                " SET seen_at = now(), url = EXCLUDED.url",
                (self.replica_id, socket.gethostname(), os.getpid(), self.url, __version__),
            )

        self.db.run(work)

    def unregister(self) -> None:
        """A clean stop: drop this replica's row and its leases (others take over now)."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute("DELETE FROM nodmix_leases WHERE holder = %s", (self.replica_id,))
            conn.execute("DELETE FROM nodmix_replicas WHERE id = %s", (self.replica_id,))
            conn.execute(f"NOTIFY {LEASES_CHANNEL}")

        with contextlib.suppress(StateUnavailableError):
            self.db.run(work)

    def alive(self, replica_id: str) -> bool:
        """Whether the replica refreshed its row within the last lease period."""
        if replica_id == self.replica_id:
            return True

        def read(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "SELECT 1 FROM nodmix_replicas WHERE id = %s"
                " AND seen_at > now() - %s * interval '1 second'",
                (replica_id, self.lease_seconds),
            ).fetchone()
            return row is not None

        return self.db.run(read)

    def describe(self) -> dict[str, Any]:
        """Live replicas and the singletons' holders."""

        def read(conn: psycopg.Connection[Any]) -> dict[str, Any]:
            replicas = conn.execute(
                "SELECT id, host, pid, url, version, started_at, seen_at,"
                " extract(epoch from now() - seen_at) FROM nodmix_replicas"
                " WHERE seen_at > now() - %s * interval '1 second' ORDER BY started_at",
                (self.lease_seconds,),
            ).fetchall()
            leases = conn.execute(
                "SELECT name, holder, epoch, acquired_at, expires_at > now(),"
                " extract(epoch from expires_at - now()) FROM nodmix_leases ORDER BY name"
            ).fetchall()
            return {
                "replicas": [
                    {
                        "id": r[0],
                        "host": r[1],
                        "pid": r[2],
                        "url": r[3],
                        "version": r[4],
                        "startedAt": r[5].isoformat(),
                        "seenSecondsAgo": round(float(r[7]), 1),
                        "self": r[0] == self.replica_id,
                    }
                    for r in replicas
                ],
                "singletons": [
                    {
                        "name": n,
                        "holder": h,
                        "epoch": e,
                        "since": a.isoformat(),
                        "live": bool(live),
                        "expiresInSeconds": round(float(left), 1),
                    }
                    for n, h, e, a, live, left in leases
                ],
            }

        return self.db.run(read)

    # ---- leases -----------------------------------------------------------------------------

    def try_acquire(self, name: str) -> int | None:
        """Take the lease `name` if it is free or expired; its epoch, or None."""

        def work(conn: psycopg.Connection[Any]) -> int | None:
            row = conn.execute(
                "INSERT INTO nodmix_leases (name, holder, expires_at)"
                " VALUES (%s, %s, now() + %s * interval '1 second')"
                " ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,"
                " epoch = nodmix_leases.epoch + 1, acquired_at = now(),"
                " expires_at = EXCLUDED.expires_at"
                " WHERE nodmix_leases.expires_at < now()"
                " OR nodmix_leases.holder = EXCLUDED.holder"
                " RETURNING epoch",
                (name, self.replica_id, self.lease_seconds),
            ).fetchone()
            return int(row[0]) if row else None

        return self.db.run(work, durable=True)

    def renew(self, name: str, epoch: int) -> bool:
        """Extend a lease this replica holds; False when it is no longer ours."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "UPDATE nodmix_leases SET expires_at = now() + %s * interval '1 second'"
                " WHERE name = %s AND holder = %s AND epoch = %s RETURNING 1",
                (self.lease_seconds, name, self.replica_id, epoch),
            ).fetchone()
            return row is not None

        return self.db.run(work, durable=True)

    def release(self, name: str, epoch: int) -> None:
        """Give a lease up (others are woken)."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "DELETE FROM nodmix_leases WHERE name = %s AND holder = %s AND epoch = %s",
                (name, self.replica_id, epoch),
            )
            conn.execute(f"NOTIFY {LEASES_CHANNEL}")

        with contextlib.suppress(StateUnavailableError):
            self.db.run(work)

    def holds(self, name: str) -> bool:
        """Whether this replica runs the singleton `name` now."""
        return name in self._held

    async def run_singleton(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body()` whenever this replica holds the lease `name` (see the module docs)."""
        backoff = self.poll_every
        while True:
            epoch = await self._acquire(name)
            log.info("this replica now runs %s (lease epoch %d)", name, epoch)
            self._held[name] = epoch
            finished = False
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._keep, name, epoch, group.cancel_scope)
                    try:
                        await body()
                        finished = True
                    except Exception:
                        log.exception("singleton %s failed; it starts again", name)
                    group.cancel_scope.cancel()
            finally:
                self._held.pop(name, None)
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.release, name, epoch)
            if finished:
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _acquire(self, name: str) -> int:
        while True:
            try:
                epoch = await anyio.to_thread.run_sync(self.try_acquire, name)
            except StateUnavailableError as exc:
                log.debug("cannot take %s now: %s", name, exc)
                epoch = None
            if epoch is not None:
                return epoch
            with anyio.move_on_after(self.poll_every):
                await self._wake.wait()

    async def _keep(self, name: str, epoch: int, scope: anyio.CancelScope) -> None:
        """Renew the lease; cancel the singleton before it could outlive it."""
        margin = min(1.0, self.lease_seconds * 0.1)
        deadline = time.monotonic() + self.lease_seconds - margin
        while True:
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as timer:
                await anyio.sleep(self.renew_every)
                started = time.monotonic()
                try:
                    ours = await anyio.to_thread.run_sync(self.renew, name, epoch)
                except StateUnavailableError as exc:
                    log.warning("cannot renew %s: %s", name, exc)
                    continue
                if not ours:
                    log.warning("lost the lease of %s to another replica; stopping it here", name)
                    scope.cancel()
                    return
                deadline = started + self.lease_seconds - margin
            if timer.cancel_called:
                log.warning("could not renew %s in time; stopping it on this replica", name)
                scope.cancel()
                return

    # ---- events -----------------------------------------------------------------------------

    def publish(self, topic: str, payload: dict[str, Any]) -> None:
        """This replica's listeners now; the others through NOTIFY (sent by `serve`)."""
        deliver(self._listeners, topic, payload)
        self._outbox.append((topic, payload))
        self._outbox_ready.set()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Hear every event, from any replica."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _send(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            for topic, payload in batch:
                text = json.dumps({"o": self.replica_id, "t": topic, "p": payload})
                if len(text.encode()) > NOTIFY_LIMIT:
                    row = conn.execute(
                        "INSERT INTO nodmix_events (payload) VALUES (%s) RETURNING id",
                        (text.encode(),),
                    ).fetchone()
                    assert row is not None
                    text = json.dumps({"o": self.replica_id, "ref": int(row[0])})
                conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, text))

        try:
            self.db.run(work)
        except StateUnavailableError as exc:
            log.warning("%d event(s) not sent to other replicas: %s", len(batch), exc)

    async def _sender(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = anyio.Event()
            batch, self._outbox = self._outbox, []
            if batch:
                await anyio.to_thread.run_sync(self._send, batch)

    async def _listener(self) -> None:
        import psycopg

        backoff = 0.2
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.db.conninfo, autocommit=True)
            except psycopg.Error as exc:
                log.debug("event connection: %s", exc)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            try:
                async with conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    await conn.execute(f"LISTEN {LEASES_CHANNEL}")
                    self.listening = True
                    async for note in conn.notifies():
                        if note.channel == LEASES_CHANNEL:
                            self._wake.set()
                            self._wake = anyio.Event()
                        else:
                            await self._received(note.payload)
            except psycopg.Error as exc:
                log.warning("lost the event connection: %s; reconnecting", exc)
            finally:
                self.listening = False

    async def _received(self, text: str) -> None:
        try:
            note = json.loads(text)
        except ValueError:
            return
        if not isinstance(note, dict) or note.get("o") == self.replica_id:
            return
        if "ref" in note:
            ref = int(note["ref"])

            def read(conn: psycopg.Connection[Any]) -> bytes | None:
                row = conn.execute(
                    "SELECT payload FROM nodmix_events WHERE id = %s", (ref,)
                ).fetchone()
                return bytes(row[0]) if row else None

            try:
                raw = await anyio.to_thread.run_sync(self.db.run, read)
            except StateUnavailableError:
                return
            if raw is None:
                return
            note = json.loads(raw)
        topic, payload = note.get("t"), note.get("p")
        if isinstance(topic, str) and isinstance(payload, dict):
            deliver(self._listeners, topic, payload)

    async def _heartbeat(self) -> None:
        while True:
            try:
                await anyio.to_thread.run_sync(self._beat)
            except StateUnavailableError as exc:
                log.debug("replica heartbeat: %s", exc)
            await anyio.sleep(self.renew_every)

    def _beat(self) -> None:
        if check_schema(self.db) is not None:
            return  # a newer Nodmix migrated the schema: nothing more is written
        self.register()

        def prune(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "DELETE FROM nodmix_replicas WHERE seen_at < now() - %s * interval '1 second'",
                (max(self.lease_seconds * 20, 600),),
            )
            conn.execute(
                "DELETE FROM nodmix_events WHERE created_at < now() - %s * interval '1 second'",
                (EVENTS_KEPT_SECONDS,),
            )
            conn.execute("DELETE FROM nodmix_flushes WHERE at < now() - interval '1 day'")

        self.db.run(prune)

    async def serve(self) -> None:
        """Heartbeats, the LISTEN connection and the NOTIFY sender, until cancelled."""
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._heartbeat)
                group.start_soon(self._listener)
                group.start_soon(self._sender)
                await anyio.sleep(math.inf)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.unregister)
