"""`nodmix cron run ID`: one run of a job in this process, through a local runtime (the same
runner, history and delivery as the gateway's scheduler)."""

from __future__ import annotations

import contextlib

from nodmix.automation.clock import SystemClock
from nodmix.automation.history import RunRecord
from nodmix.automation.jobs import Job
from nodmix.origin import TurnOrigin
from nodmix.runtime import Runtime


class _LocalTurns:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def run(
        self,
        text: str,
        *,
        agent_id: str | None,
        session_key: str | None,
        origin: TurnOrigin,
        model: str | None,
    ) -> str:
        outcome = await self._runtime.submit(
            text, agent_id=agent_id, session_key=session_key, model=model, origin=origin
        )
        result = getattr(outcome, "result", None)
        return str(result.reply) if result is not None else str(getattr(outcome, "message", ""))


async def run_now(job: Job) -> RunRecord | None:
    """Run `job` once now; None when a run of it is in progress elsewhere."""
    async with Runtime.open() as runtime:
        runner = runtime.automation.make_runner(_LocalTurns(runtime), SystemClock())
        try:
            return await runner.run_job(job, "manual")
        finally:
            for adapter in runtime.channels.adapters.values():
                with contextlib.suppress(Exception):
                    await adapter.aclose()
