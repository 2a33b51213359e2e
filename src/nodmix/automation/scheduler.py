"""The scheduler: fires due jobs on time, inside the gateway.

It keeps every enabled job's next fire time (computed by `schedule.next_fire`) and sleeps
until the earliest, waking at least once a second to notice edits of `jobs.json` (the CLI and
the `cron` tool write it). A job whose stored next time passed while no scheduler ran fires
once on start (`automation.missedRuns: "run-once"`, the default) or is skipped (`"skip"`); a
job that is still running when it is due again is skipped for that time. The clock is
injected: tests drive `tick()` under a `ManualClock`.

Crashes: a fired run is in the history (with the time it is for, its slot) before the state
file records the job's next time, so a restart never loses a slot, and a slot already in the
history is never caught up again. On start, runs a dead process left `running` are closed as
`interrupted`, and a scheduled one is run again once (`retryInterrupted`, on by default) when
it was the job's latest run and no newer run is due then anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from nodmix import offload
from nodmix.automation.clock import Clock
from nodmix.automation.history import RunRecord
from nodmix.automation.jobs import Job, JobError
from nodmix.automation.runner import JobRunner
from nodmix.automation.schedule import ScheduleError, next_fire
from nodmix.automation.store import JobState, JobStore, encode_state, schedule_key
from nodmix.crashpoints import crash_point

log = logging.getLogger("nodmix.automation")

MissedPolicy = Literal["run-once", "skip"]
POLL_SECONDS = 1.0
STATE_FLUSH_SECONDS = 1.0
START_RECORD_SECONDS = 10.0
"""How long the state write waits for fired runs to be on record (a slow disk)."""
SLOT_TOLERANCE = 0.001


class Scheduler:
    """Fires the jobs of one store through a `JobRunner`."""

    def __init__(
        self,
        store: JobStore,
        runner: JobRunner,
        clock: Clock,
        *,
        missed: MissedPolicy = "run-once",
        poll_seconds: float = POLL_SECONDS,
        on_fired: Callable[[Job, float], None] | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.clock = clock
        self.missed = missed
        self.poll_seconds = poll_seconds
        self.on_fired = on_fired
        """Called with the job and its due time as each run is started (benchmarks, tests)."""
        self.jobs: dict[str, Job] = {}
        self.states: dict[str, JobState] = {}
        self._signature: tuple[int, int, int] | None = None
        self._loaded = False
        self._dirty = False
        self._last_flush = 0.0
        self._fired_unsaved = False
        self._starting: list[anyio.Event] = []

    # ---- state ----------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read `jobs.json` if it changed; True when it did."""
        signature = self.store.signature()
        if self._loaded and signature == self._signature:
            return False
        try:
            jobs = self.store.load()
        except JobError as exc:
            log.error("cannot read cron jobs: %s", exc)
            self._signature, self._loaded = signature, True
            return False
        if not self._loaded:
            self.states = self.store.load_state()
        self._signature, self._loaded = signature, True
        self.jobs = {job.id: job for job in jobs}
        now = self.clock.now()
        for job in list(jobs):
            try:
                self._plan(job, now)
            except (ScheduleError, ArithmeticError, ValueError) as exc:
                # One unusable job (a hand-edited file, a zone this machine lacks) must not
                # stop the others: it is left out until the file changes.
                log.error("cron job %s cannot be scheduled and is skipped: %s", job.id, exc)
                del self.jobs[job.id]
        for gone in set(self.states) - set(self.jobs):
            del self.states[gone]
            self._dirty = True
        return True

    def _plan(self, job: Job, now: float) -> None:
        state = self.states.get(job.id)
        key = schedule_key(job)
        if state is None or state.schedule_key != key:
            state = state or JobState()
            state.schedule_key = key
            state.next_run_at = next_fire(job.schedule, now, anchor=job.created_at)
            if job.schedule.kind == "at" and state.next_run_at is None:
                state.next_run_at = job.schedule.at  # its moment passed while no scheduler ran
            self.states[job.id] = state
            self._dirty = True
        # A stored time in the past means missed: it fires once, unless skipped by policy or
        # started already (the process died before the state file recorded the next time).
        due = state.next_run_at
        if due is not None and due <= now and (self.missed == "skip" or self._ran(job, due)):
            state.next_run_at = next_fire(job.schedule, now, anchor=job.created_at)
            self._dirty = True

    def _ran(self, job: Job, slot: float) -> bool:
        """Whether a run for `slot` of `job` is in the history."""
        runs = self.runner.history.runs(job.id)
        return any(r.slot is not None and abs(r.slot - slot) < SLOT_TOLERANCE for r in runs)

    def next_due(self) -> float | None:
        """The earliest next fire time of an enabled job."""
        times = []
        for job_id, state in self.states.items():
            job = self.jobs.get(job_id)
            if job is not None and job.enabled and state.next_run_at is not None:
                times.append(state.next_run_at)
        return min(times, default=None)

    def _due_state(self, force: bool) -> bytes | None:
        now = self.clock.now()
        if not self._dirty or not (force or now - self._last_flush >= STATE_FLUSH_SECONDS):
            return None
        self._dirty = False
        self._last_flush = now
        return encode_state(self.states)

    def _write_state(self, data: bytes) -> None:
        try:
            self.store.write_state(data)
        except OSError as exc:
            log.warning("cannot write cron state: %s", exc)

    def flush(self, *, force: bool = False) -> None:
        """Write the state file if it changed (at most once a second unless forced)."""
        data = self._due_state(force)
        if data is not None:
            self._write_state(data)

    async def flush_soon(self, *, force: bool = False) -> None:
        """`flush` with the (fsync'ed) write on a worker thread, off the event loop."""
        data = self._due_state(force)
        if data is not None:
            await anyio.to_thread.run_sync(self._write_state, data)

    # ---- firing ---------------------------------------------------------------------------

    def tick(self, group: TaskGroup, *, reload: bool = True) -> list[Job]:
        """Start every job due now in `group` (after `reload`, unless told not to); the jobs
        started."""
        if reload:
            self.reload()
        now = self.clock.now()
        fired = []
        for job_id, state in self.states.items():
            job = self.jobs.get(job_id)
            due = state.next_run_at
            if job is None or due is None or due > now:
                continue
            if not job.enabled:  # a disabled job does not pile up a missed run
                state.next_run_at = next_fire(job.schedule, now, anchor=job.created_at)
                self._dirty = True
                continue
            trigger = "missed" if now - due > max(self.poll_seconds * 5, 5.0) else "schedule"
            state.next_run_at = next_fire(job.schedule, max(now, due), anchor=job.created_at)
            state.last_run_at = now
            self._dirty = True
            if job.id in self.runner.running:
                log.info("job %s is still running at its next time; skipped", job.id)
                continue
            fired.append(job)
            if self.on_fired is not None:
                self.on_fired(job, due)
            self._start(group, job, trigger, due)
        self._fired_unsaved = self._fired_unsaved or bool(fired)
        return fired

    def _start(self, group: TaskGroup, job: Job, trigger: str, slot: float | None) -> None:
        started = anyio.Event()
        self._starting.append(started)
        group.start_soon(self._run, job, trigger, slot, started)

    async def _on_record(self) -> None:
        """Wait until the runs fired so far are in the history (or skipped)."""
        starting, self._starting = self._starting, []
        with anyio.move_on_after(START_RECORD_SECONDS):
            for started in starting:
                await started.wait()

    async def _run(
        self, job: Job, trigger: str, slot: float | None = None, started: anyio.Event | None = None
    ) -> None:
        try:
            record = await self.runner.run_job(job, trigger, slot=slot, started=started)
        except Exception:
            log.exception("job %s crashed", job.id)
            return
        state = self.states.get(job.id)
        if record is not None and state is not None:
            state.last_status, state.last_error = record.status, record.error
            self._dirty = True

    # ---- after a crash ----------------------------------------------------------------

    async def recover(self, group: TaskGroup) -> list[RunRecord]:
        """Close the runs a dead process left `running` and retry the scheduled ones that may
        run again (see the module docs); the runs closed."""
        await offload.call(self.store, self.reload)
        history = self.runner.history
        closed = await anyio.to_thread.run_sync(history.close_interrupted, self.clock.now())
        for run in closed:
            log.warning("run %s of %s was interrupted (%s)", run.run_id, run.job_id, run.error)
            job, state = self.jobs.get(run.job_id), self.states.get(run.job_id)
            latest = max(history.runs(run.job_id), key=lambda r: r.started_at)
            if state is None or job is None or latest.run_id != run.run_id:
                continue
            state.last_status, state.last_error = run.status, run.error
            self._dirty = True
            if self._may_retry(job, run, state.next_run_at):
                log.info("job %s: running the interrupted run %s once more", job.id, run.run_id)
                self._start(group, job, "retry", run.slot)
                self._fired_unsaved = True
        return closed

    def _may_retry(self, job: Job, run: RunRecord, next_run_at: float | None) -> bool:
        due_now = next_run_at is not None and next_run_at <= self.clock.now()
        return (
            job.enabled
            and job.retry_interrupted
            and run.trigger in ("schedule", "missed")
            and not due_now  # a newer run starts now anyway
        )

    async def run(self) -> None:
        """Fire jobs until cancelled (after `recover`)."""
        async with anyio.create_task_group() as group:
            await self.recover(group)
            while True:
                # Off the loop on a database; the loop below awaits it, so no tick or flush
                # of this scheduler runs beside it.
                await offload.call(self.store, self.reload)
                self.tick(group, reload=False)
                if self._fired_unsaved:  # a restart must not fire these runs again
                    self._fired_unsaved = False
                    await self._on_record()  # the history first: a slot is never lost
                    crash_point("automation.fired-recorded")
                    await self.flush_soon(force=True)
                due = self.next_due()
                now = self.clock.now()
                wait_until = now + self.poll_seconds if due is None else due
                with anyio.move_on_after(self.poll_seconds):
                    await self.clock.sleep_until(min(wait_until, now + self.poll_seconds))
                await self.flush_soon()
