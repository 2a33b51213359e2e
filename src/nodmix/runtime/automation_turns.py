"""Automation runs straight on a runtime (no gateway): `nodmix cron run`, and tests that
drive the scheduler under an injected clock."""

from __future__ import annotations

from nodmix.origin import TurnOrigin
from nodmix.runtime.core import Runtime


class RuntimeTurns:
    """`TurnStarter` over an open `Runtime`."""

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
