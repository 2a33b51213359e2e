"""`approval` events to every connected client, whatever the origin of the turn, so the owner can
answer from the web page (the frames are described in `approvals.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import anyio

from nodmix.events import RunEvent
from nodmix.gateway.wire import event_json
from nodmix.security.approvals import ApprovalBroker


class EventTarget(Protocol):
    """A client connection that takes event frames (`ws.Connection`)."""

    def event(self, event: str, payload: dict[str, Any]) -> None: ...


class ApprovalFanout:
    """The open WebSocket connections, told about every approval request and answer (of
    every replica: `publish` is `Gateway.event`, which hands the event to each replica's
    connections)."""

    def __init__(self, broker: ApprovalBroker, publish: Callable[[str, Any], None]) -> None:
        self.broker = broker
        self.connections: set[EventTarget] = set()
        self._publish = publish

    def __call__(self, event: RunEvent) -> None:
        """A broker listener: publish the event to every replica's connections."""
        self._publish("approval", event_json(event))

    def start(self) -> None:
        """Start listening to the broker."""
        if self not in self.broker.listeners:
            self.broker.listeners.append(self)

    def stop(self) -> None:
        """Stop listening."""
        if self in self.broker.listeners:
            self.broker.listeners.remove(self)

    async def stop_on_exit(self) -> None:
        """A task of the gateway's group: stop listening when the gateway stops serving."""
        try:
            await anyio.sleep_forever()
        finally:
            self.stop()
