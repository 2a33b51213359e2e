"""Talking to a running gateway over its WebSocket: `GatewayClient` and `nodmix agent` remote.

`run_remote(args, url, token, ...)` is what `nodmix agent -m` does when a gateway answers: the
same output as an in-process run (answer text streamed on stdout, tool activity on stderr, the
same `--json` object), with the turn running inside the gateway, which owns the sessions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, Protocol

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Subprotocol

from nodmix.errors import NodmixError
from nodmix.gateway.auth import WS_PROTOCOL
from nodmix.gateway.settings import TOKEN_ENV

TURN_JSON_KEYS = (
    "reply",
    "sessionId",
    "sessionKey",
    "agentId",
    "model",
    "usage",
    "stopReason",
    "steps",
    "toolCalls",
)
"""The keys of `nodmix agent --json` for a turn (the gateway's answer adds `runId`)."""

EventHandler = Callable[[dict[str, Any]], None]
ApprovalAsker = Callable[["GatewayClient", dict[str, Any]], Coroutine[Any, Any, None]]
"""Answers an `approval_requested` event (the terminal asks the owner)."""


class Printer(Protocol):
    """Shows a run's events (`nodmix.cli.printer.EventPrinter`): called with each one as an
    object with snake_case attributes (`as_event`)."""

    streamed: bool
    """Whether answer text was already shown as it streamed."""
    mid_line: bool
    """Whether the last text shown did not end its line."""

    def __call__(self, event: Any, /) -> None: ...


class GatewayError(NodmixError):
    """The gateway answered a request with `ok: false`."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        self.code = str(error.get("code", "error"))
        self.status = error.get("status")
        super().__init__(_explain(str(error.get("message", "the gateway reported an error"))))


_MISSING_KEY = re.compile(r"no API key: set ([A-Z_][A-Z0-9_]*)")


def _explain(message: str) -> str:
    """Add why to a missing-key error whose variable this shell has: the gateway's lacks it."""
    found = _MISSING_KEY.search(message)
    if found is None or not os.environ.get(found.group(1)):
        return message
    return (
        f"{message}; {found.group(1)} is set in this shell but not where the gateway runs:"
        " restart the gateway from this shell"
    )


class GatewayClient:
    """A connection to `/ws`; `request()` sends one request and waits for its answer."""

    def __init__(self, connection: ClientConnection) -> None:
        """Use an open connection (see `GatewayClient.connect`)."""
        self._connection = connection
        self._ids = itertools.count(1)
        self._pending: dict[str, anyio.Event] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._handlers: dict[str, EventHandler] = {}
        self._listeners: dict[str, list[EventHandler]] = {}

    @classmethod
    @asynccontextmanager
    async def connect(cls, url: str, *, token: str | None = None) -> AsyncIterator[GatewayClient]:
        """Connect to the gateway at `url` (`http://host:port`).

        Raises:
            NodmixError: the gateway refused the token or cannot be reached.
        """
        ws_url = "ws" + url.removeprefix("http").rstrip("/") + "/ws"
        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:
            connection = await connect(
                ws_url,
                subprotocols=[Subprotocol(WS_PROTOCOL)],
                additional_headers=headers,
                proxy=None,
                max_size=None,
                open_timeout=10,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status == 401:
                raise NodmixError(
                    f"the gateway at {url} rejected the token: pass --token or set {TOKEN_ENV}"
                ) from None
            raise NodmixError(f"the gateway at {url} refused the connection ({status})") from None
        except OSError as exc:
            raise NodmixError(f"cannot reach the gateway at {url}: {exc}") from None
        client = cls(connection)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(client._read)
                yield client
                group.cancel_scope.cancel()
        finally:
            await connection.close()

    def listen(self, event: str, handler: EventHandler) -> None:
        """Pass the payloads of gateway-wide `event` frames (such as `approval`) to `handler`."""
        self._listeners.setdefault(event, []).append(handler)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_event: EventHandler | None = None,
    ) -> Any:
        """Send a request, pass its events to `on_event`, and return the answer's payload.

        Raises:
            GatewayError: the gateway answered `ok: false`.
            NodmixError: the connection closed before the answer.
        """
        req_id = str(next(self._ids))
        done = anyio.Event()
        self._pending[req_id] = done
        if on_event is not None:
            self._handlers[req_id] = on_event
        frame = {"type": "req", "id": req_id, "method": method, "params": dict(params or {})}
        try:
            await self._connection.send(json.dumps(frame))
            await done.wait()
        finally:
            self._pending.pop(req_id, None)
            self._handlers.pop(req_id, None)
        answer = self._answers.pop(req_id, None)
        if answer is None:
            raise NodmixError("the gateway closed the connection before answering")
        if not answer.get("ok"):
            raise GatewayError(answer.get("error") or {})
        return answer.get("payload")

    async def _read(self) -> None:
        try:
            async for text in self._connection:
                frame = json.loads(text)
                if frame.get("type") == "event":
                    payload = frame.get("payload") or {}
                    handler = self._handlers.get(str(payload.get("reqId")))
                    if handler is not None and frame.get("event") == "agent":
                        handler(payload)
                    for listener in self._listeners.get(str(frame.get("event")), ()):
                        listener(payload)
                elif frame.get("type") == "res":
                    req_id = str(frame.get("id"))
                    self._answers[req_id] = frame
                    waiter = self._pending.get(req_id)
                    if waiter is not None:
                        waiter.set()
        except ConnectionClosed:
            pass
        for waiter in self._pending.values():
            waiter.set()


# ---- nodmix agent through the gateway -----------------------------------------------------------


_RAW_FIELDS = frozenset({"arguments", "details", "usage"})
"""Fields that stay plain JSON (tool arguments are a dict in the local event too)."""


def as_event(payload: Any) -> Any:
    """An event payload as an object with snake_case attributes (what `EventPrinter` reads)."""
    if isinstance(payload, dict):
        return SimpleNamespace(
            **{_snake(k): v if k in _RAW_FIELDS else as_event(v) for k, v in payload.items()}
        )
    if isinstance(payload, list):
        return [as_event(v) for v in payload]
    return payload


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def run_remote(
    args: argparse.Namespace,
    url: str,
    token: str | None,
    *,
    printer: Printer,
    on_approval: ApprovalAsker,
) -> int:
    """`nodmix agent -m TEXT` through the gateway at `url` with `token` (the chat is
    `cli/remote.py`): `printer` shows the run's events, `on_approval` answers its approval
    requests."""
    return anyio.run(_one_turn, args, url, token, printer, on_approval)


def turn_params(args: argparse.Namespace, message: str) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message}
    for key, attr in (("agentId", "agent_id"), ("sessionKey", "session_key"), ("model", "model")):
        value = getattr(args, attr, None)
        if value:
            params[key] = value
    if getattr(args, "no_tools", False):
        params["disableTools"] = True
    return params


async def remote_turn(
    client: GatewayClient,
    params: dict[str, Any],
    printer: Printer,
    *,
    on_approval: ApprovalAsker,
) -> tuple[Any, bool]:
    """Run one message; returns (answer, interrupted). Ctrl-C aborts the run in the gateway;
    approval requests go to `on_approval` (the terminal asks the owner)."""
    import signal

    run_id: str | None = None
    answer: Any = None
    interrupted = False

    def on_event(payload: dict[str, Any]) -> None:
        nonlocal run_id
        run_id = payload.get("runId") or run_id
        if payload.get("kind") == "approval_requested":
            group.start_soon(on_approval, client, payload)
        elif payload.get("kind") != "accepted":
            printer(as_event(payload))

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    interrupted = True
                    if run_id is not None:
                        await client.request("agent.abort", {"runId": run_id})
                    return

        async def work() -> None:
            nonlocal answer
            try:
                answer = await client.request("agent", params, on_event=on_event)
            except GatewayError as exc:
                if not (interrupted and exc.code == "aborted"):
                    raise
            group.cancel_scope.cancel()

        group.start_soon(watch)
        group.start_soon(work)
    return answer, interrupted


async def _one_turn(
    args: argparse.Namespace,
    url: str,
    token: str | None,
    printer: Printer,
    on_approval: ApprovalAsker,
) -> int:
    async with GatewayClient.connect(url, token=token) as client:
        params = turn_params(args, args.message)
        answer, interrupted = await remote_turn(client, params, printer, on_approval=on_approval)
    if interrupted:
        print("\nnodmix: turn interrupted; the transcript was kept", file=sys.stderr)
        return 130
    return _report(answer, args, printer)


def _report(answer: dict[str, Any], args: argparse.Namespace, printer: Any) -> int:
    if "command" in answer:
        if args.json:
            _print_json({k: v for k, v in answer.items() if k != "runId"})
        else:
            print(answer.get("message", ""))
        return 0
    if args.json:
        _print_json({key: answer.get(key) for key in TURN_JSON_KEYS})
    else:
        if printer.mid_line:
            print()
        if not printer.streamed and answer.get("reply"):
            print(answer["reply"])
    return 1 if answer.get("stopReason") == "error" else 0


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
