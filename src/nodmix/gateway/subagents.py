"""The gateway side of subagents: recovering and tidying the runs on disk for the gateway's
lifespan (`subagents.recovery.serve`), and telling every WebSocket client about a result
announced into a session, as a `session` event:

`{"type": "event", "event": "session", "payload": {"kind": "message", "agentId",
"sessionKey", "source": {"kind": "subagent", "runId", "label", "childSessionKey", "status"},
"entry": {...}}}` (the `custom_message` entry as `sessions.history` returns it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nodmix.subagents.announce import Announcement
    from nodmix.subagents.service import Subagents


class EventTarget(Protocol):
    """A connected WebSocket client."""

    def event(self, name: str, payload: Any) -> None: ...


Clients = Callable[[], Iterable[EventTarget]]


async def serve_subagents(service: Subagents, clients: Clients) -> None:
    """Recover and sweep subagent runs, and push announcements to `clients()`, until
    cancelled (the gateway's lifespan)."""
    from nodmix.subagents.recovery import serve

    listen = AnnouncementFanout(clients)
    service.listeners.append(listen)
    try:
        await serve(service)
    finally:
        if listen in service.listeners:
            service.listeners.remove(listen)


class AnnouncementFanout:
    """Tells every WebSocket client about a result announced into a session."""

    def __init__(self, clients: Clients) -> None:
        self._clients = clients

    def __call__(self, post: Announcement) -> None:
        from nodmix.sessions.entries import entry_to_builtins

        run = post.run
        payload = {
            "kind": "message",
            "agentId": post.agent_id,
            "sessionKey": post.session_key,
            "source": {
                "kind": "subagent",
                "runId": run.run_id,
                "label": run.label,
                "childSessionKey": run.child_key,
                "status": run.status,
            },
            "entry": entry_to_builtins(post.entry),
        }
        for client in list(self._clients()):
            client.event("session", payload)
