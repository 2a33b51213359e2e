"""The gateway side of the channel layer: channel messages become turns through the same path
as WebSocket and HTTP turns (`Gateway.start_turn`: the run tracker, the runtime's per-session
turn lock, shutdown draining), the webhook paths of channels that receive updates over HTTP
(served on the gateway's own port, checked by the channel's adapter), and the `channels.*` /
`pairing.*` WebSocket methods."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, Route

from nodmix import offload
from nodmix.channels.base import WebhookVerifier
from nodmix.channels.registry import VERIFIED_BY_GET
from nodmix.errors import ConfigError
from nodmix.events import (
    AssistantMessageEvent,
    ModelFallback,
    RunEvent,
    TextDeltaEvent,
    discard,
)
from nodmix.gateway.errors import bad_request
from nodmix.gateway.runs import ActiveRun
from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.channels.streaming import ReplyStream
    from nodmix.gateway.state import Gateway
    from nodmix.gateway.ws import Connection
    from nodmix.media.files import InboundFile


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


def _stream_sink(stream: ReplyStream) -> Callable[[RunEvent], None]:
    """The turn's events as a channel reply stream: the model's text, and where steps end."""

    def emit(event: RunEvent) -> None:
        if isinstance(event, TextDeltaEvent):
            stream.text(event.text)
        elif isinstance(event, AssistantMessageEvent | ModelFallback):
            stream.step_end()  # the next step (or the fallback model) starts the text afresh

    return emit


class GatewayTurns:
    """`TurnRunner` over a serving gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def start(
        self,
        text: str,
        *,
        agent_id: str,
        session_key: str,
        origin: TurnOrigin,
        stream: ReplyStream | None = None,
        files: Sequence[InboundFile] = (),
    ) -> _Handle:
        agent = self._gateway.runtime.agent(agent_id)
        run = self._gateway.start_turn(
            text,
            agent=agent,
            session_key=session_key,
            emit=discard if stream is None else _stream_sink(stream),
            origin=f"channel:{origin.channel}",
            turn_origin=origin,
            files=files,
        )
        return _Handle(run)

    def workspace(self, agent_id: str) -> Path:
        return self._gateway.runtime.agent(agent_id).workspace

    def default_agent(self) -> str:
        return self._gateway.runtime.agent(None).id


# ---- webhooks -----------------------------------------------------------------------------------


def channel_webhook_routes(gateway: Gateway, taken: list[BaseRoute]) -> list[Route]:
    """A `POST` route per channel webhook path (none unless a channel is in webhook mode).

    Raises:
        ConfigError: a webhook path is one the gateway already serves.
    """
    manager = gateway.runtime.channels
    routes = []
    for path, channel in manager.webhook_paths().items():
        probe = {"type": "http", "path": path, "method": "POST", "root_path": ""}
        if any(route.matches(probe)[0] != Match.NONE for route in taken):
            raise ConfigError(
                f"{path} is already a gateway path: choose another webhook path",
                file=str(gateway.runtime.loaded.path),
                key=f"channels.{channel}.webhook.path",
            )
        methods = ["GET", "POST"] if channel in VERIFIED_BY_GET else ["POST"]
        routes.append(Route(path, _webhook_endpoint(gateway, channel), methods=methods))
    return routes


def verification_paths(webhooks: list[Route]) -> frozenset[str]:
    """Webhook paths whose platform also sends a `GET` (answered by the channel itself)."""
    return frozenset(r.path for r in webhooks if r.methods is not None and "GET" in r.methods)


def _webhook_endpoint(gateway: Gateway, channel: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        if request.method == "GET":  # the platform checking the URL (WhatsApp's hub.challenge)
            adapter: object = gateway.runtime.channels.adapters.get(channel)
            if not isinstance(adapter, WebhookVerifier):
                return PlainTextResponse("the channel is not running yet", status_code=503)
            code, text = adapter.verify_webhook(request.query_params)
            return PlainTextResponse(text, status_code=code)
        # The body (bounded by the gateway's body limit) is read only once the adapter has
        # checked the headers' secret.
        status = await gateway.runtime.channels.webhook(channel, request.headers, request.body)
        return JSONResponse({"ok": status == 200}, status_code=status)

    return endpoint


# ---- WebSocket methods -------------------------------------------------------------------------


async def _pending(conn: Connection, channels: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Pending pairing requests per channel (read off the loop on a database)."""
    pairing = conn.gateway.runtime.channels.pairing

    def read() -> dict[str, list[dict[str, Any]]]:
        return {c: [p.to_json(c) for p in pairing.load(c).pending] for c in channels}

    return await offload.call(pairing, read)


async def channels_status(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Each configured channel: connection, last event, errors, counts, pending pairings."""
    manager = conn.gateway.runtime.channels
    channels = manager.configured()
    pending = await _pending(conn, channels)
    rows = []
    for channel in channels:
        status = manager.statuses.get(channel)
        row = status.to_json() if status else {"channel": channel, "connected": False}
        row["pending"] = pending[channel]
        rows.append(row)
    return {"channels": rows}


async def pairing_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Pending pairing requests (of one channel with `channel`)."""
    manager = conn.gateway.runtime.channels
    wanted = params.get("channel")
    channels = [wanted] if isinstance(wanted, str) else manager.configured()
    pending = await _pending(conn, channels)
    return {"requests": [request for channel in channels for request in pending[channel]]}


async def pairing_approve(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Approve a pairing code: `{channel, code}`."""
    from nodmix.channels.pairing import PairingError

    channel, code = params.get("channel"), params.get("code")
    if not isinstance(channel, str) or not isinstance(code, str):
        raise bad_request("params.channel and params.code are required strings")
    pairing = conn.gateway.runtime.channels.pairing
    try:
        found = await offload.call(pairing, pairing.approve, channel, code)
    except PairingError as exc:
        raise bad_request(str(exc), param="code") from None
    return {"channel": channel, "senderId": found.sender_id, "senderName": found.sender_name}
