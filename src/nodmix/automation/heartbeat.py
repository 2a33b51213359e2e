"""The heartbeat: every `agents.defaults.heartbeat.every`, within `activeHours`, the agent
reads the `HEARTBEAT.md` checklist of its workspace in its main session. A reply that only
acknowledges (`HEARTBEAT_OK`) is not delivered; anything else goes to `heartbeat.deliver`.
No checklist (or an empty one) means no beat: nothing is sent to the model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, time
from pathlib import Path

import anyio

from nodmix.automation.jobs import Job
from nodmix.automation.runner import JobRunner, RunPlan
from nodmix.automation.schedule import Schedule, ScheduleError, parse_duration, zone
from nodmix.config.automation_schema import HeartbeatConfig
from nodmix.origin import TurnOrigin

log = logging.getLogger("nodmix.automation")

CHECKLIST = "HEARTBEAT.md"
ACK = "HEARTBEAT_OK"
MAX_CHECKLIST_CHARS = 20_000
PROMPT = (
    "Heartbeat: go through the checklist below and do what it asks. If nothing needs the "
    f"user's attention, reply with exactly {ACK} and nothing else.\n\n"
)


def is_ack(reply: str) -> bool:
    """A reply that only acknowledges (`HEARTBEAT_OK`, maybe with punctuation or markup)."""
    core = reply.strip().strip("*_`.!").strip()
    return core.upper() == ACK


def parse_hhmm(text: str) -> time:
    """`08:30` → 08:30.

    Raises:
        ScheduleError: not HH:MM.
    """
    try:
        hours, minutes = (int(p) for p in text.split(":"))
        return time(hours % 24 if hours == 24 else hours, minutes)
    except ValueError:
        raise ScheduleError(f"invalid time of day {text!r}: use HH:MM") from None


def within_active_hours(config: HeartbeatConfig, now: float) -> bool:
    """Whether `now` falls in `activeHours` (always, when unset)."""
    hours = config.active_hours
    if hours is None:
        return True
    local = datetime.fromtimestamp(now, zone(hours.timezone)).time()
    start, end = parse_hhmm(hours.start), parse_hhmm(hours.end)
    if start <= end:
        return start <= local < end
    return local >= start or local < end  # a window across midnight


def beat_job(agent_id: str, config: HeartbeatConfig) -> Job:
    """The heartbeat as a job (for the runner and the run history: `heartbeat-<agentId>`)."""
    return Job(
        id=f"heartbeat-{agent_id}",
        name="heartbeat",
        schedule=Schedule(kind="every", every_seconds=parse_duration(config.every or "30m")),
        message=CHECKLIST,
        created_at=0.0,
        agent_id=agent_id,
        session="main",
        deliver=config.deliver,
        model=config.model,
    )


class Heartbeat:
    """Beats for one agent until cancelled."""

    def __init__(
        self,
        runner: JobRunner,
        *,
        agent_id: str,
        workspace: Callable[[], Path],
        config: Callable[[], HeartbeatConfig | None],
    ) -> None:
        self.runner = runner
        self.agent_id = agent_id
        self.workspace = workspace
        self.config = config

    async def beat(self) -> bool:
        """One beat now (if the checklist has content and the hour is active); True if a turn
        ran."""
        config = self.config()
        if config is None or not config.every:
            return False
        if not within_active_hours(config, self.runner.clock.now()):
            return False
        path = self.workspace() / CHECKLIST
        try:
            checklist = path.read_text(encoding="utf-8")[:MAX_CHECKLIST_CHARS]
        except (FileNotFoundError, UnicodeDecodeError):
            return False
        if not checklist.strip():
            return False
        job = beat_job(self.agent_id, config)
        plan = RunPlan(
            trigger="heartbeat",
            text=PROMPT + checklist,
            session_key=None,
            # The owner's own checklist: it reads the owner's memory (and still writes as
            # an automation run, `nodmix.origin.is_owner_turn`).
            origin=TurnOrigin(channel="heartbeat", chat_id=self.agent_id, memory=True),
            quiet=is_ack,
        )
        return await self.runner.run(job, plan) is not None

    async def run(self) -> None:
        """Beat every `every` until cancelled (re-reading the config before each beat)."""
        clock = self.runner.clock
        while True:
            config = self.config()
            try:
                every = parse_duration(config.every) if config and config.every else None
            except ScheduleError as exc:
                log.error("agents.defaults.heartbeat.every: %s", exc)
                every = None
            if every is None:
                await anyio.sleep(5.0)  # off: look again later (a reload may turn it on)
                continue
            await clock.sleep_until(clock.now() + every)
            try:
                await self.beat()
            except Exception:
                log.exception("heartbeat of %s failed", self.agent_id)
