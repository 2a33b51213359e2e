"""Automation as the runtime holds it: the job store and run history of the state directory,
the `cron` tool, and (inside the gateway) the scheduler, the heartbeat and the runner that
webhooks share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from nodmix.automation.history import DEFAULT_RUNS_KEPT, open_run_history
from nodmix.automation.store import open_job_store
from nodmix.automation.tool import OutboundRules
from nodmix.config.schema import NodmixConfig

if TYPE_CHECKING:  # the loops run only in the gateway: `agent --local` need not import them
    from nodmix.automation.clock import Clock
    from nodmix.automation.runner import JobRunner, RunLimits, SessionPoster, TurnStarter
    from nodmix.automation.scheduler import Scheduler
    from nodmix.channels.types import OutboundMessage


Singleton = Callable[[str, Callable[[], Awaitable[None]]], Coroutine[Any, Any, None]]
"""Runs a loop on one replica of a deployment at a time (`state.coordination`)."""


class Channels(OutboundRules, Protocol):
    """The channel layer as automation uses it (also a `runner.Sender`)."""

    async def send(self, channel: str, message: OutboundMessage) -> list[str]: ...


def run_limits(config: NodmixConfig) -> RunLimits:
    """`automation.maxConcurrentRuns` / `runTimeoutSeconds` with their defaults."""
    from nodmix.automation.runner import (
        DEFAULT_MAX_CONCURRENT,
        DEFAULT_RUN_TIMEOUT_SECONDS,
        RunLimits,
    )

    section = config.automation
    return RunLimits(
        max_concurrent=section.max_concurrent_runs or DEFAULT_MAX_CONCURRENT,
        timeout_seconds=section.run_timeout_seconds or DEFAULT_RUN_TIMEOUT_SECONDS,
    )


class Automation:
    """Jobs, history and the automation loops of one runtime."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        *,
        state_dir: Path,
        channels: Channels,
        inbox: SessionPoster | None = None,
    ) -> None:
        self._config = config
        self.channels = channels
        self.inbox = inbox
        """Where replies to `session:<key>` targets are appended."""
        self.store = open_job_store(state_dir)
        self.history = open_run_history(
            state_dir, kept=config().automation.runs_kept or DEFAULT_RUNS_KEPT
        )
        self.runner: JobRunner | None = None
        """The runner of the serving gateway (webhooks use it); None outside `serve`."""
        self.scheduler: Scheduler | None = None

    def make_runner(self, turns: TurnStarter, clock: Clock | None = None) -> JobRunner:
        """A runner under the configured limits."""
        from nodmix.automation.clock import SystemClock
        from nodmix.automation.runner import JobRunner

        return JobRunner(
            store=self.store,
            history=self.history,
            turns=turns,
            sender=self.channels,
            clock=clock or SystemClock(),
            limits=run_limits(self._config()),
            inbox=self.inbox,
        )

    async def serve(
        self,
        turns: TurnStarter,
        *,
        default_agent: Callable[[], str],
        workspace: Callable[[str], Path],
        clock: Clock | None = None,
        singleton: Singleton | None = None,
    ) -> None:
        """Run the scheduler and the heartbeat until cancelled (the gateway's lifespan).

        With several gateway replicas `singleton(name, body)` runs each on one replica at a
        time (`cron`, `heartbeat`); alone, they just run.
        """
        from nodmix.automation.heartbeat import Heartbeat
        from nodmix.automation.scheduler import Scheduler

        runner = self.make_runner(turns, clock)
        config = self._config()
        scheduler = Scheduler(
            self.store, runner, runner.clock, missed=config.automation.missed_runs or "run-once"
        )
        agent_id = default_agent()
        heartbeat = Heartbeat(
            runner,
            agent_id=agent_id,
            workspace=lambda: workspace(agent_id),
            config=lambda: self._config().agents.defaults.heartbeat,
        )
        self.runner, self.scheduler = runner, scheduler
        try:
            async with anyio.create_task_group() as group:
                if singleton is None:
                    group.start_soon(scheduler.run)
                    group.start_soon(heartbeat.run)
                else:
                    group.start_soon(singleton, "cron", scheduler.run)
                    group.start_soon(singleton, "heartbeat", heartbeat.run)
        finally:
            self.runner = self.scheduler = None
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: scheduler.flush(force=True))
            self.history.owners.close()  # a clean stop: no run of this process is left open
