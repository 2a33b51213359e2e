"""The gateway side of automation: cron, heartbeat and webhook runs become turns through the
same path as every other turn (`Gateway.start_turn`: the run tracker, the per-session turn
lock, shutdown draining); a job's reply posted into a session reaches every WebSocket client
as a `session` event:

`{"type": "event", "event": "session", "payload": {"kind": "message", "agentId",
"sessionKey", "source": {"kind": "cron", "jobId", "jobName"}, "entry": {...}}}` (the
transcript entry as `sessions.history` returns it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from nodmix.automation.runner import RunSkipped
from nodmix.events import discard
from nodmix.gateway.automation_sessions import RunSessions
from nodmix.gateway.errors import APIError
from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.automation.inbox import SessionPost
    from nodmix.gateway.state import Gateway


class GatewayAutomationTurns:
    """`TurnStarter` over a serving gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._sessions = RunSessions(gateway.runtime)

    async def run(
        self,
        text: str,
        *,
        agent_id: str | None,
        session_key: str | None,
        origin: TurnOrigin,
        model: str | None,
    ) -> str:
        gateway = self._gateway
        agent = gateway.runtime.agent(agent_id)
        key = gateway.runtime.session_key(agent, session_key)
        try:
            run = gateway.start_turn(
                text,
                agent=agent,
                session_key=key,
                emit=discard,
                origin=origin.channel,
                model=model,
                turn_origin=origin,
            )
        except APIError as exc:
            if exc.status == 503:  # shutting down: not the job's failure
                raise RunSkipped(exc.message) from None
            raise
        try:
            outcome = await run.result()
        except BaseException:
            run.cancel()  # the per-run timeout (or shutdown) ends the turn too
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._sessions.created(agent.id, key)
        result = getattr(outcome, "result", None)
        return str(result.reply) if result is not None else str(getattr(outcome, "message", ""))


async def serve_automation(gateway: Gateway) -> None:
    """The scheduler and the heartbeat for the gateway's lifespan."""
    from nodmix.automation.inbox import SessionInbox

    runtime = gateway.runtime
    automation = runtime.automation
    inbox = automation.inbox
    listen = SessionFanout(gateway)
    if isinstance(inbox, SessionInbox):
        inbox.listeners.append(listen)
    try:
        await automation.serve(
            GatewayAutomationTurns(gateway),
            default_agent=lambda: runtime.agent(None).id,
            workspace=lambda agent_id: runtime.agent(agent_id).workspace,
            clock=gateway.settings.automation_clock,
            singleton=runtime.state.coordination.run_singleton,
        )
    finally:
        if isinstance(inbox, SessionInbox) and listen in inbox.listeners:
            inbox.listeners.remove(listen)


class SessionFanout:
    """Tells every WebSocket client about a message a job posted into a session."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def __call__(self, post: SessionPost) -> None:
        from nodmix.sessions.entries import entry_to_builtins

        payload = {
            "kind": "message",
            "agentId": post.agent_id,
            "sessionKey": post.session_key,
            "source": {"kind": "cron", "jobId": post.job_id, "jobName": post.job_name},
            "entry": entry_to_builtins(post.entry),
        }
        self._gateway.event("session", payload)
