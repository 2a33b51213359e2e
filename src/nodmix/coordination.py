"""How the parts of a deployment that must run once, and the events every client must hear,
work across gateway replicas: the `Coordination` seam.

With files there is one gateway process, so `LocalCoordination` runs each singleton at once and
hands events to this process's listeners. The postgres backend's `PgCoordination` runs a
singleton (a channel's poller, the cron scheduler, the heartbeat) only on the replica that
holds its lease, and carries events to the other replicas with LISTEN/NOTIFY.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

log = logging.getLogger("nodmix.state")

Listener = Callable[[str, dict[str, Any]], None]
"""Told `(topic, payload)` for every event published on any replica."""


class Coordination(Protocol):
    """Singletons and events of a deployment (one process, or several replicas)."""

    replica_id: str
    url: str | None
    """This replica's gateway URL, once it listens."""

    async def run_singleton(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body()` while this replica is the one running `name` (until it returns, or
        until cancelled); on another replica's failure, take it over."""
        ...

    def publish(self, topic: str, payload: dict[str, Any]) -> None:
        """Tell every replica's listeners (this one's at once, the others' soon after)."""
        ...

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Hear every event; returns the function that stops listening."""
        ...

    async def serve(self) -> None:
        """The background work (heartbeats, the event connection) until cancelled."""
        ...

    def describe(self) -> dict[str, Any]:
        """Replicas and who holds which singleton (for `nodmix status`)."""
        ...


class LocalCoordination:
    """One process is the whole deployment (the files backend)."""

    def __init__(self, replica_id: str = "local") -> None:
        self.replica_id = replica_id
        self.url: str | None = None
        self._listeners: list[Listener] = []
        self._running: set[str] = set()

    async def run_singleton(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run it now: nobody else could."""
        self._running.add(name)
        try:
            await body()
        finally:
            self._running.discard(name)

    def publish(self, topic: str, payload: dict[str, Any]) -> None:
        """Hand the event to this process's listeners."""
        deliver(self._listeners, topic, payload)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Add a listener."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def serve(self) -> None:
        """Nothing to do in the background."""
        await anyio.sleep_forever()

    def describe(self) -> dict[str, Any]:
        """This process and what it runs."""
        return {
            "replicas": [{"id": self.replica_id, "self": True}],
            "singletons": [{"name": n, "holder": self.replica_id} for n in sorted(self._running)],
        }


def deliver(listeners: list[Listener], topic: str, payload: dict[str, Any]) -> None:
    """Call each listener, logging (not raising) what one of them raises."""
    for listener in list(listeners):
        try:
            listener(topic, payload)
        except Exception:
            log.exception("an event listener failed on %s", topic)
