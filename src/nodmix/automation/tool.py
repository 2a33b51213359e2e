"""The `cron` tool: the agent schedules, lists and removes jobs ("remind me in 20 minutes to
call Anna"), with the same validation as `nodmix cron add`.

A job the agent adds from a chat is delivered to that chat unless it names another target; a
target must be a chat the agent may message (the `message` tool's rule). A job added in a
turn without a chat (the CLI, the web page, the API) is delivered into the session it was
added in (`session:<key>`, the main session by default): its reply is appended there as an
assistant message marked as the job's, and connected clients see it. One-shot jobs
(`at`, `in`) remove themselves after they ran.

Only a turn in the agent's main session (the owner's own conversation) or with no origin
(the CLI, the web page, the API) manages every job and may add a job that runs in the main
session. Any other turn (a group chat, a per-peer DM, an isolated cron run, a webhook call)
sees and removes only the jobs its own session added, can add at most
`MAX_JOBS_PER_SESSION` of them, repeating no more often than every
`MIN_AGENT_EVERY_SECONDS`, and its jobs run in fresh isolated sessions: a chat member must
not reach the owner's session, its history or its unsandboxed shell through a job, nor read
or delete the owner's reminders.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import anyio

from nodmix.messages import JsonObject
from nodmix.origin import TurnOrigin, is_automation, is_owner_turn
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult

if TYPE_CHECKING:  # the job store and schedules load with the first call, not with the tool
    from nodmix.automation.jobs import Job
    from nodmix.automation.store import JobStore

MAX_JOBS_PER_SESSION = 20
"""Jobs a turn outside the main session may have scheduled at once."""
MIN_AGENT_EVERY_SECONDS = 60.0
"""The shortest interval of a repeating job added from outside the main session."""

PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "list", "remove"]},
        "name": {"type": "string", "description": "add: a short name for the job."},
        "message": {
            "type": "string",
            "description": "add: what you will be told when the job runs (write it as an "
            "instruction to yourself, e.g. 'Remind the user to call Anna').",
        },
        "in": {"type": "string", "description": "add, one-shot: after a delay, e.g. 20m, 2h."},
        "at": {"type": "string", "description": "add, one-shot: ISO time, e.g. 2026-12-01T09:00"},
        "every": {"type": "string", "description": "add, repeating: interval, e.g. 30m, 1d."},
        "cron": {"type": "string", "description": "add, repeating: cron expression."},
        "tz": {"type": "string", "description": "Time zone of cron/at, e.g. Europe/Paris."},
        "deliver": {
            "type": "string",
            "description": "<channel>:<chatId> to send the result to, or 'session' to post "
            "it into this conversation. Default: this chat, or this conversation when the "
            "user is not in a chat.",
        },
        "session": {
            "type": "string",
            "enum": ["isolated", "main"],
            "description": "main: run in the owner's main session (only from that session).",
        },
        "id": {"type": "string", "description": "remove: the job id."},
    },
    "required": ["action"],
    "additionalProperties": False,
}


class OutboundRules(Protocol):
    """Who the agent may message (`ChannelManager`)."""

    def configured(self) -> list[str]: ...

    def outbound_allowed(self, channel: str, chat_id: str, origin: TurnOrigin | None) -> bool: ...

    def deliver_refusal(
        self, channel: str, chat_id: str, origin: TurnOrigin | None
    ) -> str | None: ...


def trusted(ctx: ToolContext) -> bool:
    """Whether the turn is the owner's: no origin, or the agent's main session itself."""
    return is_owner_turn(ctx.origin, ctx.agent_id, ctx.session_key)


def visible(jobs: list[Job], ctx: ToolContext) -> list[Job]:
    """The jobs the turn may list and remove."""
    if trusted(ctx):
        return jobs
    return [job for job in jobs if job.created_in == ctx.session_key]


def conversation(ctx: ToolContext) -> str:
    """The session a reply for this turn goes to: the turn's own, or the agent's main session
    for a one-shot API request (`agent:<id>:openai:<hex>`, archived after the request)."""
    from nodmix.sessions.keys import format_session_key, is_stateless_key

    if not is_stateless_key(ctx.session_key):
        return ctx.session_key

    return format_session_key(ctx.agent_id or "main")


class CronTools:
    """The `cron` tool as a tool source; `store` gives the job store when a call needs it."""

    def __init__(self, store: Callable[[], JobStore], channels: OutboundRules) -> None:
        self._job_store = store
        self._channels = channels
        self._tool = FunctionTool.create(
            self._call,
            name="cron",
            description="Schedule work for later: add a reminder or a repeating job, list "
            "jobs, remove one. When a job runs you get its message in a fresh session and "
            "your reply is sent to the chat, or posted into this conversation.",
            parameters=PARAMETERS,
            label="Scheduled jobs",
        )

    async def list_tools(self) -> Sequence[Tool]:
        return [self._tool]

    @property
    def _store(self) -> JobStore:
        return self._job_store()

    async def _call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        from nodmix.automation.jobs import JobError

        action = str(args.get("action") or "")
        try:
            if action == "add":
                return await self._add(args, ctx)
            if action == "list":
                jobs = visible(await anyio.to_thread.run_sync(self._store.load), ctx)
                if not jobs:
                    return ToolResult.text("no scheduled jobs")
                lines = [
                    f"{j.id}  {j.name}  {j.schedule.describe()}"
                    + ("" if j.enabled else "  (disabled)")
                    for j in jobs
                ]
                return ToolResult.text("\n".join(lines))
            if action == "remove":
                job_id = str(args.get("id") or "")
                job = await anyio.to_thread.run_sync(self._store.get, job_id)
                if not visible([job], ctx):
                    raise JobError(f"no cron job {job_id!r} added from this chat")
                await anyio.to_thread.run_sync(self._store.remove, job.id)
                return ToolResult.text(f"removed job {job.id} ({job.name})")
        except JobError as exc:
            return ToolResult.error(str(exc))
        return ToolResult.error("action must be add, list or remove")

    async def _add(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        from nodmix.automation.jobs import (
            JobError,
            build_schedule,
            new_job,
            parse_target,
            session_target,
        )

        def text(key: str) -> str | None:
            value = args.get(key)
            return str(value) if value not in (None, "") else None

        delay = text("in")
        schedule = build_schedule(
            cron=text("cron"),
            every=text("every"),
            at=f"+{delay}" if delay else text("at"),
            tz=text("tz"),
            now=time.time(),
        )
        owner = trusted(ctx)
        session = text("session") or "isolated"
        if not owner:
            self._check_untrusted(ctx, session, schedule.every_seconds)
        origin = ctx.origin
        deliver = text("deliver")
        here = f"session:{conversation(ctx)}"
        if deliver is None and origin is not None and not is_automation(origin):
            deliver = f"{origin.channel}:{origin.chat_id}"
        elif deliver is None and origin is None and session == "isolated":
            deliver = here  # the CLI, the web page, the API: this conversation
        elif deliver == "session":
            deliver = here
        if deliver is not None and session_target(deliver) is not None:
            if not owner and deliver != here:
                raise JobError("a job from this chat can only post into this session")
        elif deliver is not None:
            channel, to = parse_target(deliver)
            refused = self._channels.deliver_refusal(channel, to, origin)
            if refused is not None:
                raise JobError(refused)
        job = new_job(
            name=text("name") or (text("message") or "job")[:40],
            message=text("message") or "",
            schedule=schedule,
            now=time.time(),
            agent_id=ctx.agent_id or None,
            session=session,
            deliver=deliver,
            created_by="agent",
            created_in=ctx.session_key,
            for_owner=owner,
            created_from=(
                f"{origin.channel}:{origin.chat_id}"
                if origin is not None and not is_automation(origin)
                else None
            ),
        )
        await anyio.to_thread.run_sync(self._add_capped, job, owner)
        return ToolResult.text(
            f"scheduled job {job.id} ({job.name}): {schedule.describe()}"
            + self._where(job.id, deliver, session),
            details={"jobId": job.id},
        )

    def _where(self, job_id: str, deliver: str | None, session: str) -> str:
        """Where the job's reply goes, so the model can tell the user what to expect."""
        from nodmix.automation.jobs import session_target

        key = session_target(deliver)
        if key is not None:
            return (
                f", result posted into session {key}: the user sees it there (live in the web"
                " page or the `nodmix agent` chat if open, else when they next open it)"
            )
        if deliver is not None:
            return f", result to {deliver}"
        if session == "main":
            return ", result in the main session"
        kept = (
            ". This turn was started by automation, not by the user, so the result is sent"
            f" nowhere: it is kept in the job's run history only (`nodmix cron runs {job_id}`)."
        )
        channels = ", ".join(self._channels.configured())
        if not channels:
            return kept
        return (
            f"{kept} To have it sent, add the job with deliver: '<channel>:<chatId>'"
            f" (configured channels: {channels})."
        )

    def _check_untrusted(self, ctx: ToolContext, session: str, every: float | None) -> None:
        from nodmix.automation.jobs import JobError

        if session == "main":
            raise JobError("only the owner's main session can schedule jobs that run in it")
        if every is not None and every < MIN_AGENT_EVERY_SECONDS:
            raise JobError(
                f"a repeating job from this chat runs at most every {MIN_AGENT_EVERY_SECONDS:g}s"
            )

    def _add_capped(self, job: Job, owner: bool) -> None:
        from nodmix.automation.jobs import JobError

        def change(jobs: list[Job]) -> None:
            if not owner and sum(j.created_in == job.created_in for j in jobs) >= (
                MAX_JOBS_PER_SESSION
            ):
                raise JobError(
                    f"this chat already has {MAX_JOBS_PER_SESSION} scheduled jobs; remove one first"
                )
            jobs.append(job)

        self._store.update(change)
