"""Approval requests every replica can see (the postgres state backend).

One gateway keeps its pending requests in its broker, and that is the whole truth. Replicas
each have their own broker, so a web page that connects (or reloads) on one replica would not
list a request a turn on another replica is waiting on, and an answer to such a request could
not be told from a typo. With a shared store, each replica records the requests its own turns
ask (and drops them once answered or timed out); `approvals.list` lists them all, and
`approvals.resolve` forwards an answer only to a request some replica is really waiting on.
The store is bookkeeping: when it cannot be written, the request still works on the replica
that asked.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from nodmix import offload
from nodmix.events import ApprovalRequested, ApprovalResolved, RunEvent
from nodmix.stores import provided

if TYPE_CHECKING:
    from nodmix.coordination import Coordination
    from nodmix.security.approvals import ApprovalBroker

log = logging.getLogger("nodmix.gateway")

APPROVAL_ANSWER = "approval.answer"
"""The event that carries an answer to the replica whose turn asked (postgres backend)."""


class SharedApprovals(Protocol):
    """Pending requests of every replica, in their wire shape (`ApprovalRequest.to_json`)."""

    def asked(self, requests: list[dict[str, Any]]) -> None:
        """This replica's turns now wait on `requests`."""
        ...

    def settled(self, request_id: str) -> None:
        """A request of this replica was answered, timed out or given up."""
        ...

    def pending(self, *, session_key: str | None = None) -> list[dict[str, Any]]:
        """Unanswered requests of live replicas (of one session when given), oldest first."""
        ...


def open_shared_approvals(state_dir: Path) -> SharedApprovals | None:
    """The backend's shared store; None with files (one process: its broker is enough)."""
    found: SharedApprovals | None = provided(state_dir, "security.approvals")
    return found


class ApprovalRecorder:
    """A broker listener that keeps the shared store in step with this replica's requests."""

    def __init__(self, shared: SharedApprovals) -> None:
        self.shared = shared

    def attach(self, broker: ApprovalBroker) -> None:
        """Listen first, so a request is recorded before any client hears of it."""
        if self not in broker.listeners:
            broker.listeners.insert(0, self)

    async def detach_on_exit(self, broker: ApprovalBroker) -> None:
        """A task of the gateway's group: stop listening when the gateway stops serving."""
        try:
            await anyio.sleep_forever()
        finally:
            if self in broker.listeners:
                broker.listeners.remove(self)

    def __call__(self, event: RunEvent) -> None:
        """Record a batch of requests, or drop an answered one."""
        try:
            if isinstance(event, ApprovalRequested):
                self.shared.asked(list(event.requests))
            elif isinstance(event, ApprovalResolved):
                self.shared.settled(event.id)
        except Exception as exc:  # bookkeeping only: the request still works here
            log.warning("could not share approval request state: %s", exc)


def merged_pending(
    local: list[dict[str, Any]], shared: SharedApprovals | None, session_key: str | None
) -> list[dict[str, Any]]:
    """This replica's requests, then other replicas' (each once), oldest first."""
    if shared is None:
        return local
    try:
        others = shared.pending(session_key=session_key)
    except Exception as exc:
        log.warning("could not read other replicas' approval requests: %s", exc)
        return local
    seen = {r.get("id") for r in local}
    return local + [r for r in others if r.get("id") not in seen]


def asked_elsewhere(shared: SharedApprovals, request_id: str) -> bool:
    """Whether a live replica waits on `request_id` (True when the store cannot tell)."""
    try:
        return any(r.get("id") == request_id for r in shared.pending())
    except Exception as exc:
        log.warning("could not read other replicas' approval requests: %s", exc)
        return True


def answer_forwarded(broker: ApprovalBroker, payload: dict[str, Any]) -> None:
    """An answer given on another replica to a request this replica's turn asked."""
    from nodmix.security.approvals import ANSWERS

    request_id, decision, by = payload.get("id"), payload.get("decision"), payload.get("by")
    for answer in ANSWERS:
        if isinstance(request_id, str) and decision == answer and broker.get(request_id):
            broker.resolve(request_id, answer, by=by if isinstance(by, str) else "websocket")


class ForwardedAnswers:
    """`ElsewhereApprovals` (`security.parts`) over the shared store: a chat `/approve` that
    lands on a replica whose turns did not ask is forwarded, like a WebSocket answer."""

    def __init__(self, shared: SharedApprovals, coordination: Coordination) -> None:
        self.shared = shared
        self.coordination = coordination

    @property
    def round_trips(self) -> bool:
        """Whether looking a request up is a database round trip (a chat answer then
        looks it up off the event loop, `SecurityParts.answer_command_async`; forwarding
        only queues a NOTIFY)."""
        return offload.round_trips(self.shared)

    def waiting(self, request_id: str) -> dict[str, Any] | None:
        try:
            return next((r for r in self.shared.pending() if r.get("id") == request_id), None)
        except Exception as exc:  # cannot tell: the answer is not forwarded blindly
            log.warning("could not read other replicas' approval requests: %s", exc)
            return None

    def forward(self, request_id: str, answer: str, *, by: str) -> None:
        self.coordination.publish(APPROVAL_ANSWER, {"id": request_id, "decision": answer, "by": by})
