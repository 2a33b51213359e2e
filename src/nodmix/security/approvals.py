"""Approval requests: created when a tool call needs a person's yes, answered or timed out.

`ApprovalBroker.request` parks the calling tool call until someone answers `resolve(id, ...)`
or `approvalTimeoutSeconds` pass (then it is denied). Requests that share a `batch` key and
arrive together (the nested calls of one code-mode program) are presented as one batch.

Delivery is a seam: an `ApprovalPresenter` shows a batch to whoever is talking to the agent,
chosen by the turn's origin through `ApprovalRouter`:

- `owner` (turns with no origin): in the CLI's own process a y/n/always prompt on the
  terminal; in the gateway `EventPresenter`, an `approval_requested` event on the turn's own
  event stream (the web page and `nodmix agent` answer it);
- `channel` / `channel:<id>` (registered by the channel layer): a message on the chat the turn
  came from, answered with `/approve <id>`, `/always <id>` or `/deny <id>`.

Every batch and answer is also announced to the broker's listeners (the gateway forwards them
to all WebSocket clients, so the web page can answer requests from any origin).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import anyio
from anyio.abc import TaskGroup

from nodmix.events import ApprovalRequested, ApprovalResolved, EventSink, RunEvent, discard
from nodmix.origin import TurnOrigin
from nodmix.security.exec_policy import describe_origin

log = logging.getLogger("nodmix.security")

Answer: TypeAlias = Literal["allow-once", "allow-always", "deny"]
Outcome: TypeAlias = Literal["allow-once", "allow-always", "deny", "timeout", "cancelled"]
ANSWERS: tuple[Answer, ...] = ("allow-once", "allow-always", "deny")
BATCH_WINDOW_SECONDS = 0.05
"""How long the first request of a batch waits for the others of the same program."""
MAX_PENDING = 256
"""Requests waiting at once, process-wide; more are denied at once (bounded state)."""


@dataclass(slots=True, kw_only=True)
class ApprovalRequest:
    """One tool call waiting for a yes or no."""

    id: str
    agent_id: str
    session_key: str
    command: str
    cwd: str
    reason: str
    origin: TurnOrigin | None
    """None for the owner's own turns, else the chat the turn came from."""
    expires_at: float
    """Wall-clock time (seconds) when it is denied unanswered."""
    batch: str | None = None
    tool: str = "exec"
    outcome: Outcome | None = None
    answered_by: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    emit: EventSink = discard

    def to_json(self) -> dict[str, Any]:
        """The wire shape (events, `approvals.list`)."""
        return {
            "id": self.id,
            "agentId": self.agent_id,
            "sessionKey": self.session_key,
            "tool": self.tool,
            "command": self.command,
            "cwd": self.cwd,
            "reason": self.reason,
            "origin": describe_origin(self.origin),
            "expiresAt": int(self.expires_at * 1000),
        }


@dataclass(slots=True)
class ApprovalBatch:
    """Requests presented together."""

    id: str
    requests: list[ApprovalRequest]

    def event(self) -> ApprovalRequested:
        """The run event announcing the batch."""
        return ApprovalRequested(requests=[r.to_json() for r in self.requests], batch_id=self.id)


class ApprovalPresenter(Protocol):
    """Shows a batch to a person. Answers come back through `broker.resolve` (the presenter
    may call it itself, like the terminal prompt, or leave it to an RPC or a chat command)."""

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None: ...


class EventPresenter:
    """Emits the batch as an `approval_requested` event on the turn's own event stream."""

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Emit once through the first request's sink (a batch comes from one turn)."""
        batch.requests[0].emit(batch.event())


class RecordingPresenter:
    """Keeps every batch it is shown and answers nothing (the fake of the seam: tests, and a
    starting point for channel presenters, which answer later through `/approve <id>`)."""

    def __init__(self) -> None:
        self.batches: list[ApprovalBatch] = []

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Record the batch."""
        self.batches.append(batch)


class ApprovalRouter:
    """Picks the presenter for a turn's origin: `owner` for the owner's turns (no origin),
    `channel:<id>` then `channel` for channel turns; events when none is registered."""

    def __init__(self, fallback: ApprovalPresenter | None = None) -> None:
        self._presenters: dict[str, ApprovalPresenter] = {}
        self.fallback: ApprovalPresenter = fallback or EventPresenter()

    def register(self, key: str, presenter: ApprovalPresenter) -> Callable[[], None]:
        """Use `presenter` for origins of `key` (`owner`, `channel`, `channel:telegram`);
        returns a function that removes it again."""
        self._presenters[key] = presenter

        def remove() -> None:
            if self._presenters.get(key) is presenter:
                del self._presenters[key]

        return remove

    def presenter_for(self, origin: TurnOrigin | None) -> ApprovalPresenter:
        """The presenter for `origin`."""
        if origin is None:
            return self._presenters.get("owner", self.fallback)
        found = self._presenters.get(f"channel:{origin.channel}")
        return found or self._presenters.get("channel", self.fallback)


Listener: TypeAlias = Callable[[RunEvent], None]


def quoted_id(request_id: str, limit: int = 40) -> str:
    """A request id as an answer quotes it: ids are 8 characters, so one that came in longer
    (typed or sent by anyone) is cut, not echoed back whole."""
    if len(request_id) <= limit:
        return repr(request_id)
    return f"{request_id[:limit]!r}… ({len(request_id)} characters)"


class ApprovalBroker:
    """Pending approval requests of this process."""

    def __init__(self, router: ApprovalRouter | None = None) -> None:
        self.router = router or ApprovalRouter()
        self.listeners: list[Listener] = []
        self._pending: dict[str, ApprovalRequest] = {}
        self._staged: dict[str, ApprovalBatch] = {}
        self._group: TaskGroup | None = None

    def attach(self, group: TaskGroup) -> None:
        """Present batches as tasks of `group` (the runtime's background group)."""
        self._group = group

    def pending(self, *, session_key: str | None = None) -> list[ApprovalRequest]:
        """Unanswered requests, oldest first (of one session when given)."""
        return [r for r in self._pending.values() if session_key in (None, r.session_key)]

    def get(self, request_id: str) -> ApprovalRequest | None:
        """A pending request by id."""
        return self._pending.get(request_id)

    def new_id(self) -> str:
        """A short id people can type (`/approve 3f9c2a1b`)."""
        return uuid.uuid4().hex[:8]

    async def request(self, req: ApprovalRequest, timeout_seconds: float) -> Outcome:
        """Present `req` (batched with its siblings) and wait for the answer or the timeout."""
        if len(self._pending) >= MAX_PENDING:
            return "deny"
        self._pending[req.id] = req
        try:
            if req.batch is None:
                self._present(ApprovalBatch(id=req.id, requests=[req]))
            else:
                await self._stage(req)
            with anyio.move_on_after(max(0.0, req.expires_at - time.time())):
                await req.done.wait()
            if req.outcome is None:
                self._finish(req, "timeout", None)
        except BaseException:
            if req.outcome is None:
                self._finish(req, "cancelled", None)
            raise
        finally:
            self._pending.pop(req.id, None)
        assert req.outcome is not None
        return req.outcome

    async def _stage(self, req: ApprovalRequest) -> None:
        assert req.batch is not None
        batch = self._staged.get(req.batch)
        if batch is not None:
            batch.requests.append(req)
            return
        batch = ApprovalBatch(id=f"batch_{req.id}", requests=[req])
        self._staged[req.batch] = batch
        try:
            await anyio.sleep(BATCH_WINDOW_SECONDS)
        finally:
            self._staged.pop(req.batch, None)
            live = [r for r in batch.requests if r.outcome is None]
            if live:
                batch.requests = live
                self._present(batch)

    def _present(self, batch: ApprovalBatch) -> None:
        event = batch.event()
        for listener in list(self.listeners):
            self._notify(listener, event)
        presenter = self.router.presenter_for(batch.requests[0].origin)
        if self._group is None:
            log.warning("approval broker has no task group; batch %s not presented", batch.id)
            return
        self._group.start_soon(self._run_presenter, presenter, batch)

    async def _run_presenter(self, presenter: ApprovalPresenter, batch: ApprovalBatch) -> None:
        try:
            await presenter.present(batch, self)
        except Exception:
            log.exception("approval presenter %s failed", type(presenter).__name__)

    def resolve(self, request_id: str, answer: Answer, *, by: str | None = None) -> bool:
        """Answer a pending request; False when it is unknown or already answered."""
        req = self._pending.get(request_id)
        if req is None or req.outcome is not None:
            return False
        self._finish(req, answer, by)
        return True

    def _finish(self, req: ApprovalRequest, outcome: Outcome, by: str | None) -> None:
        req.outcome, req.answered_by = outcome, by
        req.done.set()
        event = ApprovalResolved(id=req.id, decision=outcome, by=by)
        self._notify(req.emit, event)
        for listener in list(self.listeners):
            self._notify(listener, event)

    @staticmethod
    def _notify(sink: Callable[[Any], Any], event: RunEvent) -> None:
        try:
            sink(event)
        except Exception:
            log.exception("approval event listener failed")
