"""`nodmix cron run ID`: one run of a job in this process, through a local runtime (the same
runner, history and delivery as the gateway's scheduler)."""

from __future__ import annotations

import contextlib

from nodmix.automation.clock import SystemClock
from nodmix.automation.history import RunRecord
from nodmix.automation.jobs import Job
from nodmix.runtime import Runtime
from nodmix.runtime.automation_turns import RuntimeTurns


async def run_now(job: Job) -> RunRecord | None:
    """Run `job` once now; None when a run of it is in progress elsewhere."""
    async with Runtime.open() as runtime:
        runner = runtime.automation.make_runner(RuntimeTurns(runtime), SystemClock())
        try:
            return await runner.run_job(job, "manual")
        finally:
            runner.history.owners.close()
            for adapter in runtime.channels.adapters.values():
                with contextlib.suppress(Exception):
                    await adapter.aclose()
