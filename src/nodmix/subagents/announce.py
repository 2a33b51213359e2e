"""Telling a requester what a subagent it did not wait for came back with.

The result goes into the requester's session as an entry the model sees on its next turn (a
`custom_message` of type `subagent_result`, shown to people too), appended under the
session's turn lock like any turn's entries (a turn running there finishes first), at most
once per run even when a restart repeats the announcement. Listeners hear of it (the gateway
pushes a `session` event to the web page and the CLI chat), and when the requester's turn came
from a chat, the result is sent to that chat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from nodmix.origin import is_automation, is_owner_turn
from nodmix.sessions import CustomMessageEntry, Session
from nodmix.sessions.keys import format_session_key, is_stateless_key
from nodmix.subagents.host import SubagentHost
from nodmix.subagents.records import SubagentRun

log = logging.getLogger("nodmix.subagents")

SUBAGENT_RESULT = "subagent_result"
"""The `customType` of an announced result."""
EXTRA_WAIT_SECONDS = 60.0
"""How much longer than the agent's turn timeout an announcement waits for a running turn."""
DEDUPE_SCAN = 500
"""Entries at the end of a session searched for an earlier announcement of the same run."""


@dataclass(frozen=True, slots=True)
class Announcement:
    """A result posted into a session."""

    agent_id: str
    session_key: str
    run: SubagentRun
    entry: CustomMessageEntry


Listener = Callable[[Announcement], None]


def _name(run: SubagentRun) -> str:
    return f'"{run.label}"' if run.label else run.run_id


def model_text(run: SubagentRun) -> str:
    """What the requester's model reads on its next turn."""
    where = f"run {run.run_id}, session {run.child_key}"
    head = f"[Subagent {_name(run)} ({where})"
    if run.status == "completed":
        return (
            f"{head} finished the task you gave it. Its report follows; it comes from the "
            f"subagent, not from the user.]\n\n{run.reply or '(no reply)'}"
        )
    return f"{head} {run.status}: {run.error or 'no reason given'}.]"


def chat_text(run: SubagentRun) -> str:
    """What the chat the request came from is sent."""
    if run.status == "completed":
        return f"Subagent {_name(run)} finished:\n\n{run.reply or '(no reply)'}"
    return f"Subagent {_name(run)} {run.status}: {run.error or 'no reason given'}"


def announce_key(run: SubagentRun, exists: Callable[[str], bool]) -> str | None:
    """The session a result goes to: the requester's; when that is gone (a one-shot API
    session, archived when its request ended; a session deleted meanwhile), its agent's main
    session if the requester spoke for the owner, else none (a chat member's result never
    lands in the owner's conversation)."""
    if not is_stateless_key(run.parent_key) and exists(run.parent_key):
        return run.parent_key
    if is_owner_turn(run.origin, run.parent_agent, run.parent_key):
        return format_session_key(run.parent_agent)
    return None


class Announcer:
    """Posts results into sessions and chats."""

    def __init__(self, host: SubagentHost) -> None:
        self._host = host
        self.listeners: list[Listener] = []

    async def announce(self, run: SubagentRun) -> None:
        """Post `run`'s result (after any turn running in the session).

        Raises:
            SessionError: the session cannot be opened.
            TimeoutError: a turn kept the session busy past the agent's turn timeout.
        """
        host = self._host
        agent = host.agent(run.parent_agent)
        key = announce_key(run, lambda k: host.sessions.store(agent.id).get(k) is not None)
        if key is None:
            log.info("subagent %s: its requester's session is gone", run.run_id)
            await self._to_chat(run)
            return
        wait = agent.timeout_seconds + EXTRA_WAIT_SECONDS
        with anyio.fail_after(wait):
            async with host.sessions.hold_turn(key, timeout=wait):
                session = await host.sessions.open_async(key, workspace=agent.workspace)
                entry = _posted(session, run.run_id)
                fresh = entry is None
                if entry is None:
                    entry = session.transcript.append_custom_message(
                        SUBAGENT_RESULT,
                        model_text(run),
                        display=True,
                        details={
                            "runId": run.run_id,
                            "sessionKey": run.child_key,
                            "label": run.label,
                            "status": run.status,
                        },
                    )
                    # The session moves up in the lists (its context size is unchanged).
                    session.update_usage(context_tokens=session.entry.context_tokens)
                    session.flush()
        if not fresh:
            return
        post = Announcement(agent.id, key, run, entry)
        for listener in list(self.listeners):
            try:
                listener(post)
            except Exception:  # a listener must not undo an announcement
                log.warning("a subagent listener failed", exc_info=True)
        await self._to_chat(run)

    async def _to_chat(self, run: SubagentRun) -> None:
        origin = run.origin
        if origin is None or is_automation(origin):
            return
        chats = self._host.channel_access
        if origin.channel not in chats.configured():
            return
        from nodmix.channels.types import OutboundMessage

        message = OutboundMessage(
            chat_id=origin.chat_id, text=chat_text(run), thread_id=origin.thread_id
        )
        try:
            await chats.send(origin.channel, message)
        except Exception as exc:
            log.warning("could not send subagent %s's result to %s: %s", run.run_id, origin, exc)


def _posted(session: Session, run_id: str) -> CustomMessageEntry | None:
    entries = session.entries
    for entry in reversed(entries[-DEDUPE_SCAN:]):
        if (
            isinstance(entry, CustomMessageEntry)
            and entry.custom_type == SUBAGENT_RESULT
            and isinstance(entry.details, dict)
            and entry.details.get("runId") == run_id
        ):
            return entry
    return None
