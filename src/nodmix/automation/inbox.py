"""Delivery into a session: a job with `deliver: "session:<key>"` (what a reminder asked for
from the CLI, the web page or the API gets) has its reply appended to that session's
transcript as an assistant message marked as the job's (`api: "cron"`, `model:
"cron:<jobId>"`), so the next turn's context, `nodmix sessions show` and the web page's
history have it. No model turn starts in that session.

The append takes the session's turn lock (in process and the `flock` across processes) like a
turn does: a turn running there finishes first and the reminder comes after its reply, never
in the middle of it. Listeners (the gateway's WebSocket fan-out) hear each posted message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from nodmix import offload
from nodmix.messages import AssistantMessage, TextBlock

if TYPE_CHECKING:
    from nodmix.agents import AgentProfile
    from nodmix.automation.jobs import Job
    from nodmix.sessions import MessageEntry, Session, SessionManager

log = logging.getLogger("nodmix.automation")

DELIVERY_API = "cron"
"""The `api` of an assistant message a job posted into a session."""
EXTRA_WAIT_SECONDS = 60.0
"""How much longer than the agent's turn timeout a post waits for a running turn."""


def delivered_message(job: Job, text: str) -> AssistantMessage:
    """The assistant message a job's reply becomes in the target session."""
    return AssistantMessage(
        content=(TextBlock(text=text),), api=DELIVERY_API, model=f"cron:{job.id}"
    )


def job_of(message: object) -> str | None:
    """The job id of a message a job posted, else None."""
    if isinstance(message, AssistantMessage) and message.api == DELIVERY_API:
        return message.model.removeprefix("cron:")
    return None


@dataclass(frozen=True, slots=True)
class SessionPost:
    """One message a job posted into a session."""

    agent_id: str
    session_key: str
    job_id: str
    job_name: str
    entry: MessageEntry


Listener = Callable[[SessionPost], None]


class SessionHost(Protocol):
    """Where the sessions live (the runtime): agents, session keys and the session manager."""

    sessions: SessionManager

    def agent(self, agent_id: str | None = None) -> AgentProfile: ...

    def session_key(self, agent: AgentProfile, session_key: str | None) -> str: ...

    def open_session(self, agent: AgentProfile, session_key: str | None) -> Session: ...

    async def open_session_async(self, agent: AgentProfile, session_key: str | None) -> Session: ...


class SessionInbox:
    """Appends jobs' replies to sessions of the runtime (a `runner.SessionPoster`)."""

    def __init__(self, runtime: SessionHost) -> None:
        self._runtime = runtime
        self.listeners: list[Listener] = []

    async def post(self, job: Job, session_key: str, text: str) -> None:
        """Append `text` to `session_key` (of the job's agent) after any running turn.

        Raises:
            SessionError: an unknown agent or a malformed key.
            TimeoutError: a turn kept the session busy longer than the agent's turn timeout.
        """
        runtime = self._runtime
        agent = runtime.agent(job.agent_id)
        key = runtime.session_key(agent, session_key)
        wait = agent.timeout_seconds + EXTRA_WAIT_SECONDS
        with anyio.fail_after(wait):  # the in-process turn lock has no deadline of its own
            async with runtime.sessions.hold_turn(key, timeout=wait):
                session = await runtime.open_session_async(agent, key)
                entry = session.append_message(delivered_message(job, text))
                session.update_usage()  # the session moves up in the lists
                await offload.call(runtime.sessions.backend, session.flush)
        post = SessionPost(agent.id, key, job.id, job.name, entry)
        for listener in list(self.listeners):
            try:
                listener(post)
            except Exception:  # a listener must not undo a delivery
                log.warning("a session listener failed", exc_info=True)
