"""Jobs: what to say to which agent, when, and where the answer goes.

`new_job` is the one validation path: the `nodmix cron` commands and the agent's `cron` tool
both build jobs through it, so they accept and refuse the same things.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from nodmix.automation.schedule import (
    Schedule,
    ScheduleError,
    at_schedule,
    cron_schedule,
    every_schedule,
)
from nodmix.errors import NodmixError
from nodmix.origin import TurnOrigin

SessionMode = Literal["isolated", "main"]
MAX_MESSAGE_CHARS = 20_000
MAX_NAME_CHARS = 100
_TARGET = re.compile(r"([a-z][a-z0-9_-]*):(\S+)")
SESSION_TARGET = "session"
"""The `deliver` prefix of a session target (`session:<key>`; `session` alone: `main`)."""


class JobError(NodmixError, ValueError):
    """A job that cannot be created or changed (one line naming what is wrong)."""


class Job(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """A scheduled job as `jobs.json` keeps it."""

    id: str
    name: str
    schedule: Schedule
    message: str
    created_at: float
    agent_id: str | None = None
    session: SessionMode = "isolated"
    deliver: str | None = None
    """`<channel>:<chatId>`, or `session:<key>` to append the reply to that session's
    transcript; without it results stay in the run history."""
    model: str | None = None
    enabled: bool = True
    delete_after_run: bool = False
    """One-shot (`at`) jobs remove themselves after a successful run."""
    retry_interrupted: bool = True
    """A scheduled run cut short by a crash or restart runs again once when the gateway
    starts (unless a newer run is due then anyway)."""
    created_by: str = "cli"
    created_in: str | None = None
    """The session key of the turn that added the job with the `cron` tool; a turn outside
    the agent's main session sees and removes only the jobs of its own session."""
    forced: bool = False
    """`deliver` was accepted with `--force` although the channel's rules do not allow it."""
    created_from: str | None = None
    """`<channel>:<chatId>` of the chat whose turn added the job: it may always get the
    job's results (as a turn may always answer its own chat)."""
    for_owner: bool | None = None
    """The owner made the job (the CLI, or a turn that speaks for the owner): its runs may
    read the owner's memory. Unset in jobs written before this was recorded: see
    `is_owners`."""

    def is_owners(self) -> bool:
        """Whether the owner made the job: recorded, else made by the CLI or in the agent's
        main session."""
        if self.for_owner is not None:
            return self.for_owner
        main = f"agent:{self.agent_id or 'main'}:main"
        return self.created_by == "cli" or self.created_in == main

    def describe(self) -> dict[str, object]:
        """The job as `cron list --json` and the `cron` tool show it."""
        out: dict[str, object] = msgspec.to_builtins(self)
        out["when"] = self.schedule.describe()
        return out


def new_job_id() -> str:
    """A short random job id."""
    import secrets  # hmac and hashlib: only when a job is added

    return secrets.token_hex(4)


def parse_target(target: str) -> tuple[str, str]:
    """`telegram:4242` → `("telegram", "4242")`; `session:agent:main:main` →
    `("session", "agent:main:main")`.

    Raises:
        JobError: not `<channel>:<to>`.
    """
    match = _TARGET.fullmatch(target.strip())
    if match is None:
        raise JobError(
            f"invalid delivery target {target!r}: use <channel>:<chatId> or session:<key>"
        )
    return match.group(1), match.group(2)


def creator_origin(job: Job) -> TurnOrigin | None:
    """The chat that added the job, as an origin (for the delivery check), or None."""
    if not job.created_from:
        return None
    channel, _, chat = job.created_from.partition(":")
    return TurnOrigin(channel=channel, chat_id=chat) if chat else None


def session_target(deliver: str | None) -> str | None:
    """The session key of a `session:<key>` target (`session` alone: `main`), else None."""
    if deliver is not None and deliver.strip() == SESSION_TARGET:
        return "main"
    if deliver is None or not deliver.startswith(f"{SESSION_TARGET}:"):
        return None
    return deliver[len(SESSION_TARGET) + 1 :]


def normalize_target(deliver: str | None, agent_id: str | None) -> str | None:
    """A valid `deliver` value: `session` becomes `session:main`; a session key must be
    well formed and belong to the job's agent.

    Raises:
        JobError: a malformed target, or a session of another agent.
    """
    if not deliver:
        return None
    deliver = deliver.strip()
    if deliver == SESSION_TARGET:
        deliver = f"{SESSION_TARGET}:main"
    parse_target(deliver)
    key = session_target(deliver)
    if key is None:
        return deliver
    from nodmix.config.paths import DEFAULT_AGENT_ID
    from nodmix.errors import SessionError
    from nodmix.sessions.keys import resolve_session_key

    try:
        resolved = resolve_session_key(key, default_agent_id=agent_id or DEFAULT_AGENT_ID)
    except SessionError as exc:
        raise JobError(f"invalid delivery target {deliver!r}: {exc}") from None
    if agent_id and resolved.agent_id != agent_id:
        raise JobError(
            f"invalid delivery target {deliver!r}: the session belongs to agent "
            f"{resolved.agent_id!r}, not {agent_id!r}"
        )
    return deliver


def build_schedule(
    *, cron: str | None, every: str | None, at: str | None, tz: str | None, now: float
) -> Schedule:
    """Exactly one of `cron`, `every`, `at`.

    Raises:
        JobError: none or several given, or the one given is invalid.
    """
    given = [name for name, value in (("cron", cron), ("every", every), ("at", at)) if value]
    if len(given) != 1:
        raise JobError("give exactly one schedule: cron, every or at")
    try:
        if cron:
            return cron_schedule(cron, tz)
        if every:
            if tz:
                raise JobError("tz only applies to cron and at schedules")
            return every_schedule(every)
        return at_schedule(at or "", tz, now=now)
    except ScheduleError as exc:
        raise JobError(str(exc)) from None


def new_job(
    *,
    name: str,
    message: str,
    schedule: Schedule,
    now: float,
    agent_id: str | None = None,
    session: str = "isolated",
    deliver: str | None = None,
    model: str | None = None,
    created_by: str = "cli",
    created_in: str | None = None,
    for_owner: bool = True,
    created_from: str | None = None,
    forced: bool = False,
    retry_interrupted: bool = True,
) -> Job:
    """A validated job.

    Raises:
        JobError: a field is invalid.
    """
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise JobError(f"the job name must be 1 to {MAX_NAME_CHARS} characters")
    if not message.strip():
        raise JobError("the job message is empty")
    if len(message) > MAX_MESSAGE_CHARS:
        raise JobError(f"the job message is longer than {MAX_MESSAGE_CHARS} characters")
    if session not in ("isolated", "main"):
        raise JobError(f"invalid session {session!r}: use isolated or main")
    deliver = normalize_target(deliver, agent_id)
    return Job(
        id=new_job_id(),
        name=name,
        schedule=schedule,
        message=message,
        created_at=now,
        agent_id=agent_id or None,
        session="main" if session == "main" else "isolated",
        deliver=deliver or None,
        model=model or None,
        delete_after_run=schedule.kind == "at",
        created_by=created_by,
        created_in=created_in or None,
        for_owner=for_owner,
        created_from=created_from,
        forced=forced,
        retry_interrupted=retry_interrupted,
    )
