"""Running one job: bounded, recorded, delivered.

Every run holds a slot of the global concurrency cap and runs under the per-run timeout; a
job runs once at a time (an `flock` on `automation/locks/<jobId>.lock`, so `nodmix cron run`
and the gateway's scheduler exclude each other too). The run is written to the history when
it starts (before it waits for a slot, with the scheduled time it is for and the process
running it) and when it ends; a run whose process died in between reads as `interrupted`.
A reply goes to the job's delivery target: a chat through the channel layer, or a session
(`session:<key>`) through the `SessionPoster`; a failure is reported there once, and again
only after the job succeeded in between (a marker file under `automation/failed/` remembers
it across processes).

Turns started here are not the owner typing: they carry a `TurnOrigin` on one of the
automation channels (`cron`, `heartbeat`, `webhook`; see `nodmix.origin`), so tools and the
security layer can tell them apart from a person's message.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import anyio

from nodmix import offload
from nodmix.automation.clock import Clock
from nodmix.automation.history import RunHistory, RunRecord, SlotTaken, excerpt
from nodmix.automation.jobs import Job, creator_origin, parse_target, session_target
from nodmix.automation.store import JobStore
from nodmix.channels.types import OutboundMessage
from nodmix.origin import TurnOrigin

log = logging.getLogger("nodmix.automation")

DEFAULT_MAX_CONCURRENT = 2
DEFAULT_RUN_TIMEOUT_SECONDS = 600.0


class RunSkipped(Exception):
    """Raised by a `TurnStarter` that cannot start a turn now (the gateway is shutting down):
    the run is recorded as `skipped`, and no failure is reported."""


class TurnStarter(Protocol):
    """How runs reach the agent: the gateway's turn API, or the runtime in the CLI."""

    async def run(
        self,
        text: str,
        *,
        agent_id: str | None,
        session_key: str | None,
        origin: TurnOrigin,
        model: str | None,
    ) -> str:
        """Run one turn and return its reply (a command's message for `/new` and such)."""
        ...


class Sender(Protocol):
    """Delivery through the channel layer (`ChannelManager`)."""

    async def send(self, channel: str, message: OutboundMessage) -> list[str]: ...

    def deliver_refusal(
        self, channel: str, chat_id: str, origin: TurnOrigin | None
    ) -> str | None: ...


class SessionPoster(Protocol):
    """Delivery into a session's transcript (`automation.inbox.SessionInbox`)."""

    async def post(self, job: Job, session_key: str, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RunLimits:
    """`automation.maxConcurrentRuns` and `automation.runTimeoutSeconds`."""

    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    timeout_seconds: float = DEFAULT_RUN_TIMEOUT_SECONDS


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """How one run of a job is started."""

    trigger: str
    text: str
    session_key: str | None
    origin: TurnOrigin
    exclusive: bool = True
    """One run of the job at a time (webhook runs may overlap)."""
    quiet: Callable[[str], bool] | None = None
    """Replies for which it returns True are not delivered (heartbeat acknowledgements)."""


def new_run_id() -> str:
    """A short random run id."""
    return f"run_{secrets.token_hex(6)}"


def plan_job_run(job: Job, trigger: str, run_id: str) -> RunPlan:
    """A cron job's run: a fresh session per run (`cron:<jobId>:<runId>`), or the main
    session with the message marked as a system event. A job the owner made may read the
    owner's memory (`TurnOrigin.memory`); one a chat added may not."""
    owners = job.is_owners()
    origin = TurnOrigin(channel="cron", chat_id=job.id, owner=owners, memory=owners)
    if job.session == "main":
        text = f"[System event: scheduled job {job.name!r}] {job.message}"
        return RunPlan(trigger=trigger, text=text, session_key=None, origin=origin)
    key = f"cron:{job.id}:{run_id}"
    return RunPlan(trigger=trigger, text=job.message, session_key=key, origin=origin)


class JobRunner:
    """Runs jobs for the scheduler, the heartbeat, webhooks and `nodmix cron run`."""

    def __init__(
        self,
        *,
        store: JobStore,
        history: RunHistory,
        turns: TurnStarter,
        sender: Sender | None,
        clock: Clock,
        limits: RunLimits | None = None,
        inbox: SessionPoster | None = None,
    ) -> None:
        self.store = store
        self.inbox = inbox
        self.history = history
        self.turns = turns
        self.sender = sender
        self.clock = clock
        self.limits = limits or RunLimits()
        self._slots = anyio.CapacityLimiter(max(1, self.limits.max_concurrent))
        self._dir = store.dir
        self.running: set[str] = set()

    @contextlib.contextmanager
    def _exclusive(self, job_id: str) -> Iterator[bool]:
        if job_id in self.running:
            yield False
            return
        with self.store.exclusive(job_id) as mine:
            if not mine:
                yield False
                return
            self.running.add(job_id)
            try:
                yield True
            finally:
                self.running.discard(job_id)

    async def run_job(
        self,
        job: Job,
        trigger: str,
        run_id: str | None = None,
        *,
        slot: float | None = None,
        started: anyio.Event | None = None,
    ) -> RunRecord | None:
        """Run a stored job now (for the scheduled time `slot`, if any); None when a run of it
        is already in progress. `started` is set once the run is on record (or skipped)."""
        run_id = run_id or new_run_id()
        plan = plan_job_run(job, trigger, run_id)
        return await self.run(job, plan, run_id, slot=slot, started=started)

    async def run(
        self,
        job: Job,
        plan: RunPlan,
        run_id: str | None = None,
        *,
        slot: float | None = None,
        started: anyio.Event | None = None,
    ) -> RunRecord | None:
        """Run `job` as `plan` says; None when it is exclusive and already running."""
        run_id = run_id or new_run_id()
        try:
            with contextlib.ExitStack() as stack:
                if plan.exclusive and not stack.enter_context(self._exclusive(job.id)):
                    log.info("job %s is still running; this run is skipped", job.id)
                    return None
                record = RunRecord(
                    run_id=run_id,
                    job_id=job.id,
                    trigger=plan.trigger,
                    started_at=self.clock.now(),
                    session_key=plan.session_key,
                    slot=slot,
                    owner=self.history.owners.token,
                )
                try:
                    await anyio.to_thread.run_sync(self.history.record, record)
                except SlotTaken:
                    log.info("job %s: another replica fired this time already", job.id)
                    return None
                if started is not None:
                    started.set()
                async with self._slots:
                    return await self._run(job, plan, record)
        finally:
            if started is not None:
                started.set()

    async def _run(self, job: Job, plan: RunPlan, record: RunRecord) -> RunRecord:
        reply = ""
        try:
            with anyio.fail_after(self.limits.timeout_seconds):
                reply = await self.turns.run(
                    plan.text,
                    agent_id=job.agent_id,
                    session_key=plan.session_key,
                    origin=plan.origin,
                    model=job.model,
                )
            record.status, record.reply = "ok", excerpt(reply)
        except RunSkipped as exc:
            record.status, record.error = "skipped", str(exc)
        except TimeoutError:
            record.status = "timeout"
            record.error = f"the run took longer than {self.limits.timeout_seconds:g}s"
        except Exception as exc:
            record.status, record.error = "error", str(exc) or type(exc).__name__
        record.finished_at = self.clock.now()
        with anyio.CancelScope(shield=True):
            await self._deliver(job, plan, record, reply)
            await anyio.to_thread.run_sync(self.history.record, record)
            if record.status == "ok" and job.delete_after_run:
                await anyio.to_thread.run_sync(self.store.remove, job.id)
        return record

    async def _deliver(self, job: Job, plan: RunPlan, record: RunRecord, reply: str) -> None:
        if record.status == "skipped":
            return
        store = self.store
        if record.status == "ok":
            await offload.call(store, store.set_failure_reported, job.id, False)
            if not reply.strip() or (plan.quiet is not None and plan.quiet(reply)):
                return
            record.delivered = await self._send(job, reply)
            return
        if await offload.call(store, store.failure_reported, job.id):
            return  # reported already; the next success clears it
        text = f"Job {job.name!r} failed: {record.error}"
        if await self._send(job, text) or job.deliver is None:
            await offload.call(store, store.set_failure_reported, job.id, True)

    async def _send(self, job: Job, text: str) -> bool:
        key = session_target(job.deliver)
        if key is not None:
            return await self._post(job, key, text)
        if job.deliver is None or self.sender is None:
            return False
        channel, to = parse_target(job.deliver)
        refused = self.sender.deliver_refusal(channel, to, creator_origin(job))
        if refused is not None and not job.forced:
            # Checked when the job was added too; the rules (or the pairing) may have
            # changed since. `--force` (the owner's shell) stands.
            log.warning("job %s: not delivered to %s: %s", job.id, job.deliver, refused)
            return False
        try:
            with anyio.fail_after(60):
                await self.sender.send(channel, OutboundMessage(chat_id=to, text=text))
        except Exception as exc:
            log.warning("job %s: cannot deliver to %s: %s", job.id, job.deliver, exc)
            return False
        return True

    async def _post(self, job: Job, key: str, text: str) -> bool:
        if self.inbox is None:
            return False
        try:  # the poster bounds its wait for a running turn
            await self.inbox.post(job, key, text)
        except Exception as exc:
            log.warning("job %s: cannot deliver to session %s: %s", job.id, key, exc)
            return False
        return True
