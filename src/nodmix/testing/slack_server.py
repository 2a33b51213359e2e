"""A scripted Slack server on a real socket: the Web API and a Socket Mode WebSocket.

Enough for a real Bolt app on slack_sdk: `auth.test`, `apps.connections.open` (app-level
token; a `ws://` URL here), `chat.postMessage`, `.update`, `conversations.open`, `.history`,
`.replies`, `users.info`, the external file upload and private file downloads. The socket says
`hello`, sends the events tests inject as `events_api` (or `slash_commands`) envelopes and
records the acks; an envelope not acked when its connection closes is sent again, with a higher
`retry_attempt`, on the next connection (as Slack retries)::

    with ScriptedSlack() as slack:  # channels.slack: its bot_token, app_token and api_url
        slack.inject_message(channel="D1", user="U42", text="hello", channel_type="im")
        slack.wait_for(lambda: slack.sent_texts("U42"))
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until
from nodmix.testing.slack_payloads import (
    TEAM,
    auth_test,
    events_api_envelope,
    file_object,
    hello,
    history_page,
    replies_page,
    shared_ids,
    slash_command_envelope,
    user_info,
)

T = TypeVar("T")


@dataclass
class SlackCall:
    """One recorded Web API call."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.time)


class ScriptedSlack(ThreadedServer):
    """Slack's Web API and Socket Mode for one app. Thread-safe for test code."""

    ws_protocol = "websockets-sansio"

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-nodmix-test",
        app_token: str = "xapp-nodmix-test",
        bot_user: str = "U0NODMIXBOT",
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(host=host, port=0)
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_user = bot_user
        self.bot_id = "B0NODMIXBOT"
        self.calls: list[SlackCall] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.downloads: list[str] = []  # ids of the files whose content was fetched
        self.acked: list[str] = []
        self.connections = 0
        self._unacked: dict[str, dict[str, Any]] = {}
        self._outbox: list[dict[str, Any]] = []
        self._delivered: list[dict[str, Any]] = []
        self._refreshes = 0
        self.history: dict[str, list[dict[str, Any]]] = {}
        """Message events per conversation, oldest first (`conversations.history`)."""
        self._lock = threading.Lock()
        self._changed: anyio.Event | None = None
        self._ids = itertools.count(1)
        self._uploads: dict[str, tuple[str, bytes]] = {}
        self._ts = time.time()

    # ---- test API -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's root URL."""
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        """The `apiBaseUrl` to configure."""
        return f"{self.url}/api/"

    def next_ts(self) -> str:
        """A fresh message timestamp."""
        with self._lock:
            self._ts += 0.0001
            return f"{self._ts:.6f}"

    def inject_message(
        self,
        *,
        channel: str,
        user: str,
        text: str,
        channel_type: str = "channel",
        thread_ts: str | None = None,
        mention: bool = False,
        parent_user: str | None = None,
        file: tuple[str, bytes] | None = None,
        as_app_mention: bool = False,
    ) -> str:
        """A message event (with `mention`, prefixed by `<@bot>`); its `ts`. With
        `as_app_mention` an `app_mention` event for the same message follows, as Slack sends
        both to an app subscribed to both."""
        if mention:
            text = f"<@{self.bot_user}> {text}"
        ts = self.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel_type": channel_type,
            "team": TEAM,
            "client_msg_id": f"msg-{ts}",
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
            event["parent_user_id"] = parent_user or user
        if file is not None:
            name, data = file
            file_id = f"F{next(self._ids):08d}"
            self.files[file_id] = (name, data)
            event["subtype"] = "file_share"
            event["files"] = [file_object(file_id, name, len(data), self.url)]
        with self._lock:
            stored = {k: v for k, v in event.items() if k not in ("channel", "channel_type")}
            self.history.setdefault(channel, []).append(stored)
        self.inject_event(event)
        if as_app_mention:
            mention_event = {k: event[k] for k in ("channel", "user", "text", "ts", "event_ts")}
            self.inject_event({"type": "app_mention", **mention_event})
        return ts

    def inject_command(self, command: str, text: str, *, user: str, channel: str) -> str:
        """A slash command (`/nodmix`, `new`) typed in `channel` (a `D...` id for a DM); the
        envelope id."""
        envelope_id = f"env-{next(self._ids)}"
        envelope = slash_command_envelope(envelope_id, command, text, user=user, channel=channel)
        with self._lock:
            self._outbox.append(envelope)
        self._wake()
        return envelope_id

    def inject_event(self, event: dict[str, Any]) -> str:
        """Queue an `events_api` envelope carrying `event`; the envelope id."""
        envelope_id = f"env-{next(self._ids)}"
        event_id = f"Ev{next(self._ids):08d}"
        envelope = events_api_envelope(envelope_id, event_id, event, bot_user=self.bot_user)
        with self._lock:
            self._outbox.append(envelope)
        self._wake()
        return envelope_id

    def refresh(self) -> None:
        """Send `disconnect` (`refresh_requested`) on the open sockets, as Slack does every
        few hours; the client opens a new connection."""
        self._refreshes += 1
        self._wake()

    def expire_queued(self) -> int:
        """Drop the envelopes waiting for a connection, as Slack stops retrying an event after
        a few attempts; how many (the messages stay in the conversation history)."""
        with self._lock:
            dropped, self._outbox = len(self._outbox), []
        return dropped

    def take_envelopes(self) -> list[dict[str, Any]]:
        """Remove the queued envelopes (to post their payloads to an Events API URL)."""
        with self._lock:
            taken, self._outbox = self._outbox, []
        return taken

    def retry_all(self) -> int:
        """Send every envelope delivered so far once more, as Slack retries an event it
        thinks was not handled (`retry_attempt` 1, reason `http_timeout`); how many."""
        with self._lock:
            again = [
                {**e, "retry_attempt": e["retry_attempt"] + 1, "retry_reason": "http_timeout"}
                for e in self._delivered
            ]
            self._outbox.extend(again)
        self._wake()
        return len(again)

    def calls_of(self, method: str) -> list[SlackCall]:
        """Recorded calls of one Web API method."""
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Parameters of each `chat.postMessage` (to one channel)."""
        return [
            c.params
            for c in self.calls_of("chat.postMessage")
            if channel is None or c.params.get("channel") == channel
        ]

    def sent_texts(self, channel: str | None = None) -> list[str]:
        """The text of each posted message."""
        return [str(p.get("text", "")) for p in self.posted(channel)]

    def unacked(self) -> int:
        """Envelopes sent or queued and not acked."""
        with self._lock:
            return len(self._unacked) + len(self._outbox)

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        return "calls: " + ", ".join(c.method for c in self.calls[-15:])

    # ---- Socket Mode ----------------------------------------------------------------------

    def _wake(self) -> None:
        event = self._changed
        if event is not None:
            self._call_soon(event.set)

    def _before_stop(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _socket(self, ws: WebSocket) -> None:
        await ws.accept()
        self.connections += 1
        lock = anyio.Lock()
        mine: list[str] = []

        async def send(data: dict[str, Any]) -> None:
            async with lock:
                await ws.send_text(json.dumps(data))

        refreshes = self._refreshes

        async def pump() -> None:
            while True:
                if self._refreshes != refreshes:  # ask the client to move to a new socket
                    await send({"type": "disconnect", "reason": "refresh_requested"})
                    return
                with self._lock:
                    batch, self._outbox = self._outbox, []
                    for envelope in batch:
                        self._delivered.append(envelope)
                        self._unacked[envelope["envelope_id"]] = envelope
                        mine.append(envelope["envelope_id"])
                    self._changed = anyio.Event()
                    changed = self._changed
                for envelope in batch:
                    await send(envelope)
                await changed.wait()

        await send(hello())
        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                while True:
                    ack = json.loads(await ws.receive_text())
                    with self._lock:
                        if self._unacked.pop(str(ack.get("envelope_id")), None) is not None:
                            self.acked.append(str(ack["envelope_id"]))
            except WebSocketDisconnect:
                pass
            finally:
                group.cancel_scope.cancel()
                with self._lock:  # unacked envelopes are retried on the next connection
                    retry = [self._unacked.pop(e) for e in mine if e in self._unacked]
                    for envelope in retry:
                        envelope["retry_attempt"] += 1
                        envelope["retry_reason"] = "timeout"
                    self._outbox[:0] = retry

    # ---- Web API --------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        """The Starlette app."""
        return Starlette(
            routes=[
                WebSocketRoute("/link/", self._socket),
                Route("/api/{method}", self._method, methods=["GET", "POST"]),
                Route("/upload/{id}", self._upload, methods=["POST"]),
                Route("/files-pri/{id}/{name}", self._download),
            ]
        )

    async def _params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query_params)
        if request.headers.get("content-type", "").startswith("application/json"):
            raw = await request.body()
            params.update(json.loads(raw) if raw else {})
        elif request.method == "POST":
            form = await request.form()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
        return params

    async def _method(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await self._params(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        token = token or str(params.pop("token", ""))
        with self._lock:
            self.calls.append(SlackCall(method, params))
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        handler = _METHODS.get(method)
        if handler is None:
            return JSONResponse({"ok": False, "error": "unknown_method"})
        return JSONResponse({"ok": True, **handler(self, params)})

    async def _upload(self, request: Request) -> Response:
        file_id = request.path_params["id"]
        form = await request.form()
        data = b""
        for value in form.values():
            if not isinstance(value, str):
                data = await value.read()
        if not form:
            data = await request.body()
        with self._lock:
            name = self._uploads.get(file_id, ("file", b""))[0]
            self._uploads[file_id] = (name, data)
        return Response("OK - " + str(len(data)))

    async def _download(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.bot_token}":
            return Response(status_code=403)
        found = self.files.get(request.path_params["id"])
        self.downloads.append(request.path_params["id"])  # one append: atomic
        return Response(status_code=404) if found is None else Response(found[1])

    def _post(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = self.next_ts()
        params["ts"] = ts
        message = {"type": "message", "user": self.bot_user, "bot_id": self.bot_id, "ts": ts}
        message["text"] = params.get("text", "")
        return {"channel": params.get("channel"), "ts": ts, "message": message}

    def _upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._ids):08d}"
        with self._lock:
            self._uploads[file_id] = (str(params.get("filename", "file")), b"")
        return {"upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _complete(self, params: dict[str, Any]) -> dict[str, Any]:
        out = []
        for file_id in shared_ids(params):
            name, data = self._uploads.get(file_id, ("file", b""))
            self.files[file_id] = (name, data)
            out.append({"id": file_id, "name": name, "title": name})
        return {"files": out}

    def uploaded(self) -> list[tuple[str, bytes]]:
        """`(name, bytes)` of each file shared with `files.completeUploadExternal`."""
        calls = self.calls_of("files.completeUploadExternal")
        return [self.files[file_id] for c in calls for file_id in shared_ids(c.params)]


_METHODS: dict[str, Callable[[ScriptedSlack, dict[str, Any]], dict[str, Any]]] = {
    "auth.test": lambda s, _p: auth_test(s.bot_user, s.bot_id),
    "apps.connections.open": lambda s, _p: {"url": f"ws://{s.host}:{s.port}/link/?ticket=t"},
    "chat.postMessage": lambda s, p: s._post(p),
    "chat.update": lambda s, p: {"channel": p.get("channel"), "ts": p.get("ts")},
    "users.info": lambda s, p: user_info(str(p.get("user"))),
    "conversations.open": lambda s, p: {"channel": {"id": "D" + str(p.get("users", ""))[1:]}},
    "conversations.history": lambda s, p: history_page(s.history, p),
    "conversations.replies": lambda s, p: replies_page(s.history, p),
    "files.getUploadURLExternal": lambda s, p: s._upload_url(p),
    "files.completeUploadExternal": lambda s, p: s._complete(p),
}
