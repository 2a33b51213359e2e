"""A scripted Mattermost server on a real socket: REST API v4 and the WebSocket.

Enough for the real `mattermostautodriver` client and the channel's WebSocket: `GET
/users/me` and `/users/{id}`, `POST /posts`, `PUT /posts/{id}/patch`, `POST /channels/direct`,
`POST /users/{id}/typing`, `POST /files` and `GET /files/{id}`, and for reading back what a
client missed `GET /users/{id}/channels` (with each channel's `last_post_at`) and `GET
/channels/{id}/posts?since=`; every request needs the bot's token (`401` otherwise, as the
server answers an invalid session). The WebSocket takes the token in the `Authorization`
header or an `authentication_challenge`, says `hello`, and sends the `posted` events of the
posts tests inject (the bot's own posts too, as the server does) to the sockets open at that
moment: a post made while no socket is open is stored and served by REST, never pushed
later::

    with ScriptedMattermost() as mm:  # channels.mattermost: {url: mm.url, token: mm.token}
        mm.add_user("u-ann", "ann")
        mm.inject_post(mm.dm_channel("u-ann"), "u-ann", "hello", channel_type="D")
        mm.wait_for(lambda: mm.texts(mm.dm_channel("u-ann")))

`go_down()` closes the sockets and refuses connections (REST: 503) until `come_back()`, as a
client sees a server restart; posts injected meanwhile are stored (the client's link broke).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.mattermost_posts import file_info, member_channels, posts_since
from nodmix.testing.polling import poll_until

T = TypeVar("T")
TEAM = "team0nodmix000000000000000"


class _Refused(Exception):
    """A WebSocket client sent a wrong token."""


def _error(status: int, message: str, error_id: str) -> JSONResponse:
    body = {"id": error_id, "message": message, "status_code": status, "request_id": "r"}
    return JSONResponse(body, status_code=status)


class ScriptedMattermost(ThreadedServer):
    """One Mattermost team with a bot account. Thread-safe for test code."""

    ws_protocol = "websockets-sansio"

    def __init__(self, *, token: str = "mm-bot-token", host: str = "127.0.0.1") -> None:
        super().__init__(host=host, port=0)
        self.token = token
        self.bot_id = "botnodmix00000000000000000"
        self.bot_username = "nodbot"
        self.users: dict[str, str] = {self.bot_id: self.bot_username}
        self.posts: list[dict[str, Any]] = []
        """The bot's posts."""
        self.stored: list[dict[str, Any]] = []
        """Every post, in order (what REST serves)."""
        self.channel_types: dict[str, str] = {}
        """Channels the bot is a member of, and their type (`O`, `P`, `D`, `G`)."""
        self.reads_since: list[tuple[str, int]] = []  # (channel id, ?since=) requests
        self.edits: list[dict[str, Any]] = []
        self.typing: list[str] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.connections = 0
        self.refused_tokens = 0
        self.down = False
        self.stall: str | None = None
        """`"upgrade"`: WebSocket requests get no answer at all; `"hello"`: they are accepted
        and then sent nothing (a server or a proxy that hangs); `"flap"`: each is closed
        right after its hello (a connection that keeps dropping)."""
        self.connected_at: list[float] = []
        """When each socket got its hello (`time.monotonic()`)."""
        self._sockets: list[WebSocket] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._changed: anyio.Event | None = None
        self._outboxes: list[list[dict[str, Any]]] = []
        """One per open, authenticated socket."""
        self._epoch = 0

    # ---- test API -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`channels.mattermost.url`."""
        return f"http://{self.host}:{self.port}"

    def new_id(self, prefix: str = "p") -> str:
        """A fresh 26-character id."""
        return f"{prefix}{next(self._ids):0{25}d}"[:26]

    def add_user(self, user_id: str, username: str) -> None:
        with self._lock:
            self.users[user_id] = username

    def dm_channel(self, user_id: str) -> str:
        """The DM channel of the bot and `user_id` (Mattermost names it by both ids)."""
        return "__".join(sorted((self.bot_id, user_id)))

    def inject_post(
        self,
        channel_id: str,
        user_id: str,
        message: str,
        *,
        channel_type: str = "O",
        root_id: str = "",
        file: tuple[str, bytes] | None = None,
    ) -> str:
        """A user's post: stored, and sent as a `posted` event to the open sockets (mentions
        filled in as the server does); its id."""
        post = self._new_post(channel_id, user_id, message, root_id)
        if file is not None:
            file_id = self.new_id("f")
            self.files[file_id] = file
            post["file_ids"] = [file_id]
            post["metadata"] = {"files": [file_info(file_id, *file)]}
        self._broadcast(post, channel_type)
        return str(post["id"])

    def go_down(self) -> None:
        """Close every socket and refuse connections until `come_back()`."""
        with self._lock:
            self.down = True
            self._epoch += 1
        self._wake()

    def come_back(self) -> None:
        with self._lock:
            self.down = False

    def channel_posts(self, channel_id: str) -> list[dict[str, Any]]:
        """The bot's posts in a channel, edits applied."""
        with self._lock:
            return [p for p in self.posts if p["channel_id"] == channel_id]

    def texts(self, channel_id: str) -> list[str]:
        return [str(p["message"]) for p in self.channel_posts(channel_id)]

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        return f"posts: {self.posts}"

    # ---- internals ------------------------------------------------------------------------

    def _new_post(
        self, channel_id: str, user_id: str, message: str, root_id: str
    ) -> dict[str, Any]:
        now = int(time.time() * 1000)
        return {
            "id": self.new_id(),
            "create_at": now,
            "update_at": now,
            "edit_at": 0,
            "user_id": user_id,
            "channel_id": channel_id,
            "root_id": root_id,
            "message": message,
            "type": "",
            "props": {},
            "file_ids": [],
            "metadata": {},
        }

    def _broadcast(self, post: dict[str, Any], channel_type: str) -> None:
        with self._lock:
            self.stored.append(post)
            self.channel_types.setdefault(post["channel_id"], channel_type)
        mentioned = [uid for uid, name in self.users.items() if f"@{name}" in post["message"]]
        data: dict[str, Any] = {
            "channel_type": channel_type,
            "channel_display_name": post["channel_id"],
            "sender_name": "@" + self.users.get(post["user_id"], "someone"),
            "team_id": TEAM,
            "post": json.dumps(post),
        }
        if mentioned:
            data["mentions"] = json.dumps(mentioned)
        event = {"event": "posted", "data": data, "broadcast": {"channel_id": post["channel_id"]}}
        with self._lock:
            for outbox in self._outboxes:
                outbox.append(event)
        self._wake()

    def _wake(self) -> None:
        event = self._changed
        if event is not None:
            self._call_soon(event.set)

    def _before_stop(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {self.token}"

    # ---- WebSocket ------------------------------------------------------------------------

    async def _socket(self, ws: WebSocket) -> None:
        if self.down:
            await ws.close(code=1013)
            return
        if self.stall in ("upgrade", "hello"):
            await self._stalled(ws)
            return
        await ws.accept()
        epoch = self._epoch
        authed = ws.headers.get("authorization", "") == f"Bearer {self.token}"
        lock = anyio.Lock()

        async def send(data: dict[str, Any]) -> None:
            async with lock:
                await ws.send_text(json.dumps(data))

        outbox: list[dict[str, Any]] = []

        async def hello() -> None:
            with self._lock:
                self.connections += 1
                self.connected_at.append(time.monotonic())
                self._outboxes.append(outbox)  # events from now on reach this socket
            await send({"event": "hello", "data": {"server_version": "10.11.0"}, "seq": 0})
            if self.stall == "flap":
                await ws.close(code=1001)

        async def pump() -> None:
            await self._pump(ws, send, outbox, epoch)

        if authed:
            await hello()
        async with anyio.create_task_group() as group:
            if authed:
                group.start_soon(pump)
            try:
                while not authed:
                    authed = await self._challenge(ws, send)
                    if authed:
                        await hello()
                        group.start_soon(pump)
                while True:  # an authenticated client sends only actions this server ignores
                    await ws.receive_text()
            except (WebSocketDisconnect, _Refused):
                pass
            finally:
                with self._lock:
                    if outbox in self._outboxes:
                        self._outboxes.remove(outbox)
                group.cancel_scope.cancel()

    async def _stalled(self, ws: WebSocket) -> None:
        """Say nothing (after the upgrade, with `stall == "hello"`) until the client gives up
        (or the server stops)."""
        if self.stall == "hello":
            await ws.accept()
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return

    async def _pump(
        self,
        ws: WebSocket,
        send: Callable[[dict[str, Any]], Any],
        outbox: list[dict[str, Any]],
        epoch: int,
    ) -> None:
        """Send the socket's events as they come, until the server "restarts"."""
        while True:
            if self._epoch != epoch:
                await ws.close(code=1001)
                return
            with self._lock:
                batch = outbox[:]
                outbox.clear()
                self._changed = anyio.Event()
                changed = self._changed
            for event in batch:
                await send({**event, "seq": next(self._seq)})
            await changed.wait()

    async def _challenge(self, ws: WebSocket, send: Callable[[dict[str, Any]], Any]) -> bool:
        """Read one request; True once an `authentication_challenge` carried the token.

        Raises:
            _Refused: it carried another token (the socket is closed).
        """
        request = json.loads(await ws.receive_text())
        if request.get("action") != "authentication_challenge":
            return False
        ok = (request.get("data") or {}).get("token") == self.token
        reply: dict[str, Any] = {"status": "OK" if ok else "FAIL", "seq_reply": request.get("seq")}
        if not ok:
            self.refused_tokens += 1
            reply["error"] = {"id": "api.web_socket_router.not_authenticated"}
        await send(reply)
        if not ok:
            await ws.close(code=1008)
            raise _Refused
        return True

    # ---- REST -----------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                WebSocketRoute("/api/v4/websocket", self._socket),
                Route("/api/v4/{path:path}", self._rest, methods=["GET", "POST", "PUT"]),
            ]
        )

    async def _rest(self, request: Request) -> Response:
        if self.down:
            return _error(503, "unavailable", "api.server.unavailable")
        if not self._authorized(request):
            self.refused_tokens += 1
            return _error(401, "Invalid or expired session", "api.context.session_expired")
        parts = request.path_params["path"].strip("/").split("/")
        handler = {
            "users": self._users,
            "posts": self._posts,
            "channels": self._channels,
            "files": self._files,
        }.get(parts[0])
        if handler is None:
            return _error(404, "not scripted", "api.context.404.app_error")
        return await handler(request, parts)

    async def _users(self, request: Request, parts: list[str]) -> Response:
        if request.method == "GET" and len(parts) == 3 and parts[2] == "channels":
            return JSONResponse(self._member_channels())
        if request.method == "GET" and len(parts) == 2:
            user = self.bot_id if parts[1] == "me" else parts[1]
            if user not in self.users:
                return _error(404, "Unable to find the user.", "store.sql_user.missing")
            return JSONResponse({"id": user, "username": self.users[user], "is_bot": False})
        if request.method == "POST" and parts[-1] == "typing":
            body = await request.json()
            self.typing.append(str(body.get("channel_id")))
            return JSONResponse({"status": "OK"})
        return _error(404, "not scripted", "api.context.404.app_error")

    async def _posts(self, request: Request, parts: list[str]) -> Response:
        body = await request.json()
        if request.method == "POST" and parts == ["posts"]:
            post = self._new_post(
                body["channel_id"], self.bot_id, body.get("message", ""), body.get("root_id") or ""
            )
            post["file_ids"] = body.get("file_ids") or []
            if len(post["message"]) > 16383:
                return _error(400, "message too long", "model.post.is_valid.msg.app_error")
            with self._lock:
                self.posts.append(post)
            self._broadcast(post, "O")
            return JSONResponse(post, status_code=201)
        if request.method == "PUT" and parts[-1] == "patch":
            with self._lock:
                found = [p for p in self.posts if p["id"] == parts[1]]
                if not found:
                    return _error(404, "no post", "app.post.get.app_error")
                found[0]["message"] = body.get("message", found[0]["message"])
                found[0]["update_at"] = found[0]["edit_at"] = int(time.time() * 1000)
                self.edits.append({"id": parts[1], "message": found[0]["message"]})
            return JSONResponse(found[0])
        return _error(404, "not scripted", "api.context.404.app_error")

    async def _channels(self, request: Request, parts: list[str]) -> Response:
        if request.method == "POST" and parts == ["channels", "direct"]:
            ids = await request.json()
            channel_id = "__".join(sorted(ids))
            with self._lock:
                self.channel_types.setdefault(channel_id, "D")
            return JSONResponse({"id": channel_id, "type": "D"}, status_code=201)
        if request.method == "GET" and len(parts) == 3 and parts[2] == "posts":
            return self._posts_since(parts[1], request.query_params.get("since", ""))
        return _error(404, "not scripted", "api.context.404.app_error")

    def _member_channels(self) -> list[dict[str, Any]]:
        with self._lock:
            return member_channels(self.channel_types, self.stored, TEAM)

    def _posts_since(self, channel_id: str, since: str) -> Response:
        if not since.isdigit():
            return _error(400, "only ?since= is scripted", "api.context.invalid_param.app_error")
        with self._lock:
            self.reads_since.append((channel_id, int(since)))
            return JSONResponse(posts_since(self.stored, channel_id, int(since)))

    async def _files(self, request: Request, parts: list[str]) -> Response:
        if request.method == "POST" and parts == ["files"]:
            form = await request.form()
            infos = []
            for value in form.getlist("files"):
                if isinstance(value, str):
                    continue
                file_id = self.new_id("f")
                self.files[file_id] = (value.filename or "file", await value.read())
                infos.append(file_info(file_id, *self.files[file_id]))
            return JSONResponse({"file_infos": infos}, status_code=201)
        stored = self.files.get(parts[1]) if len(parts) == 2 else None
        if stored is None:
            return _error(404, "no file", "app.file.get.app_error")
        return Response(stored[1], media_type="application/octet-stream")
