"""The runtime's automation: building its `Automation`, and automation turns run straight on
a runtime (no gateway): `nodmix cron run`, and tests that drive the scheduler under an
injected clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.automation.service import Automation
    from nodmix.runtime.host import RuntimeHost


def open_automation(runtime: RuntimeHost) -> Automation:
    """Cron jobs, run history, heartbeat and webhook runs of `runtime` (imported on first use:
    the `cron` tool's first call or the gateway's start)."""
    from nodmix.automation.inbox import SessionInbox
    from nodmix.automation.service import Automation

    return Automation(
        lambda: runtime.config,
        state_dir=runtime.state_dir,
        channels=runtime.channel_access,
        inbox=SessionInbox(runtime),
    )


class RuntimeTurns:
    """`TurnStarter` over an open `Runtime`."""

    def __init__(self, runtime: RuntimeHost) -> None:
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
