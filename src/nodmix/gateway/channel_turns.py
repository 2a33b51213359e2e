"""The gateway side of the channel layer: channel messages become turns through the same path
as WebSocket and HTTP turns (`Gateway.start_turn`: the run tracker, the runtime's per-session
turn lock, shutdown draining), and the `channels.*` / `pairing.*` WebSocket methods."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.events import discard
from nodmix.gateway.errors import bad_request
from nodmix.gateway.runs import ActiveRun
from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.gateway.app import Gateway
    from nodmix.gateway.ws import Connection


class _Handle:
    def __init__(self, run: ActiveRun) -> None:
        self._run = run

    def cancel(self) -> None:
        self._run.cancel()

    async def result(self) -> str:
        outcome = await self._run.result()
        result = getattr(outcome, "result", None)
        if result is not None:
            return str(result.reply)
        return str(getattr(outcome, "message", ""))


class GatewayTurns:
    """`TurnRunner` over a serving gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def start(self, text: str, *, agent_id: str, session_key: str, origin: TurnOrigin) -> _Handle:
        agent = self._gateway.runtime.agent(agent_id)
        run = self._gateway.start_turn(
            text,
            agent=agent,
            session_key=session_key,
            emit=discard,
            origin=f"channel:{origin.channel}",
            turn_origin=origin,
        )
        return _Handle(run)

    def workspace(self, agent_id: str) -> Path:
        return self._gateway.runtime.agent(agent_id).workspace

    def default_agent(self) -> str:
        return self._gateway.runtime.agent(None).id


# ---- WebSocket methods -------------------------------------------------------------------------


def _channels_rows(conn: Connection) -> list[dict[str, Any]]:
    manager = conn.gateway.runtime.channels
    rows = []
    for channel in manager.configured():
        status = manager.statuses.get(channel)
        row = status.to_json() if status else {"channel": channel, "connected": False}
        row["pending"] = [p.to_json(channel) for p in manager.pairing.load(channel).pending]
        rows.append(row)
    return rows


async def channels_status(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Each configured channel: connection, last event, errors, counts, pending pairings."""
    return {"channels": _channels_rows(conn)}


async def pairing_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Pending pairing requests (of one channel with `channel`)."""
    manager = conn.gateway.runtime.channels
    wanted = params.get("channel")
    channels = [wanted] if isinstance(wanted, str) else manager.configured()
    return {
        "requests": [
            p.to_json(channel)
            for channel in channels
            for p in manager.pairing.load(channel).pending
        ]
    }


async def pairing_approve(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Approve a pairing code: `{channel, code}`."""
    from nodmix.channels.pairing import PairingError

    channel, code = params.get("channel"), params.get("code")
    if not isinstance(channel, str) or not isinstance(code, str):
        raise bad_request("params.channel and params.code are required strings")
    try:
        found = conn.gateway.runtime.channels.pairing.approve(channel, code)
    except PairingError as exc:
        raise bad_request(str(exc), param="code") from None
    return {"channel": channel, "senderId": found.sender_id, "senderName": found.sender_name}
