"""The Gateway side of the scripted Discord server: a WebSocket session that says HELLO,
answers heartbeats, checks IDENTIFY's token, sends READY and the guild, then dispatches queued
events in order; a RESUME is answered with INVALID_SESSION (so clients identify afresh)."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

HEARTBEAT_MS = 5000
Event = tuple[str, dict[str, Any]]


class GatewayHub:
    """Events waiting for the identified session, shared with test threads."""

    def __init__(
        self,
        *,
        token: str,
        greeting: Callable[[], list[Event]],
        allowed_intents: Callable[[], int] = lambda: ~0,
        call_soon: Callable[[Callable[[], object]], None],
        queue_offline: bool = True,
    ) -> None:
        self.token = token
        self._greeting = greeting
        self._allowed_intents = allowed_intents
        """Intent bits an IDENTIFY may ask for (others: closed with 4014)."""
        """READY and GUILD_CREATE for a new session."""
        self._call_soon = call_soon
        self.identifies = 0
        self.sessions_ready = 0
        self.dispatched: list[Event] = []
        self._outbox: list[Event] = []
        self._lock = threading.Lock()
        self._changed: anyio.Event | None = None
        self._drop = 0
        self.queue_offline = queue_offline
        """Keep events for the next session while none is connected (else drop them, as
        Discord does; they stay in the channel history)."""
        self.live = 0

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Queue a dispatch (from any thread)."""
        with self._lock:
            if self.queue_offline or self.live:
                self._outbox.append((event, data))
            self.dispatched.append((event, data))
        self._wake()

    def replay(self, event: str) -> int:
        """Queue every dispatched `event` once more; how many."""
        with self._lock:
            again = [(e, d) for e, d in self.dispatched if e == event]
            self._outbox.extend(again)
        self._wake()
        return len(again)

    def pending(self) -> int:
        """Events not yet sent to a session."""
        with self._lock:
            return len(self._outbox)

    def _wake(self) -> None:
        changed = self._changed
        if changed is not None:
            self._call_soon(changed.set)

    def drop(self) -> None:
        """Close every open session as a Gateway restart does (code 4000: reconnect)."""
        self._drop += 1
        self._wake()

    def stop(self) -> None:
        """End the pumps (on the server's loop)."""
        if self._changed is not None:
            self._changed.set()

    async def session(self, ws: WebSocket) -> None:
        """One Gateway connection."""
        await ws.accept()
        lock = anyio.Lock()
        seq = 0

        async def send(op: int, d: Any, t: str | None = None) -> None:
            nonlocal seq
            async with lock:
                if op == 0:
                    seq += 1
                frame = {"op": op, "d": d, "s": seq if op == 0 else None, "t": t}
                await ws.send_text(json.dumps(frame))

        drops = self._drop

        async def pump() -> None:
            while True:
                if self._drop != drops:
                    await ws.close(code=4000, reason="Unknown error.")
                    return
                with self._lock:
                    batch, self._outbox = self._outbox, []
                    self._changed = anyio.Event()
                    changed = self._changed
                for event, data in batch:
                    await send(0, data, event)
                await changed.wait()

        await send(10, {"heartbeat_interval": HEARTBEAT_MS})
        identified = False
        async with anyio.create_task_group() as group:
            try:
                while True:
                    msg = json.loads(await ws.receive_text())
                    op = msg.get("op")
                    if op == 1:
                        await send(11, None)
                    elif op == 6:
                        await send(9, False)
                    elif op == 2 and not await self._identify(ws, msg, send):
                        return
                    elif op == 2:
                        identified = True
                        group.start_soon(pump)
            except WebSocketDisconnect:
                pass
            finally:
                group.cancel_scope.cancel()
                if identified:
                    with self._lock:
                        self.live -= 1

    async def _identify(
        self, ws: WebSocket, msg: dict[str, Any], send: Callable[..., Awaitable[None]]
    ) -> bool:
        """Check the token; send the greeting. False when the session was refused."""
        self.identifies += 1
        if msg["d"].get("token") != self.token:
            await ws.close(code=4004, reason="Authentication failed.")
            return False
        if int(msg["d"].get("intents", 0)) & ~self._allowed_intents():
            await ws.close(code=4014, reason="Disallowed intent(s).")
            return False
        for event, data in self._greeting():
            await send(0, data, event)
        with self._lock:
            self.sessions_ready += 1
            self.live += 1
        return True
