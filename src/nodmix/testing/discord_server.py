"""A scripted Discord server on a real socket: the REST API (v10) and the Gateway WebSocket.

Enough of both for a real discord.py client: `GET /users/@me`, `/oauth2/applications/@me`,
`/gateway/bot` (pointing at this server's `/gateway`), channel messages (JSON or multipart
with files), typing, DM channels, application commands, interaction callbacks and webhook
follow-ups, and attachment downloads. The Gateway sends HELLO, answers heartbeats, checks the
token of IDENTIFY, sends READY and one GUILD_CREATE (guild `guild_id` with the text channels
`channel_ids` and the thread `thread_id` under the first), then dispatches the events tests
inject (MESSAGE_CREATE, INTERACTION_CREATE) to the identified session, in order; a RESUME is
answered with INVALID_SESSION, so a reconnect identifies afresh. Injected events wait until a
session is ready::

    with ScriptedDiscord() as discord:
        config = {"channels": {"discord": {"token": discord.token, "apiBaseUrl": discord.api_url}}}
        discord.inject_dm(sender_id="4242", text="hello")
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel("4242")))
"""

from __future__ import annotations

import json
import mimetypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from nodmix.testing import discord_payloads as p
from nodmix.testing.discord_gateway import GatewayHub
from nodmix.testing.discord_rest import ROUTES
from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until

T = TypeVar("T")
MESSAGE_CONTENT_INTENT = 1 << 15


@dataclass
class DiscordCall:
    """One recorded REST call: `route` is the method and the path pattern."""

    route: str
    params: dict[str, Any]
    body: Any
    at: float = field(default_factory=time.time)
    failed: bool = False
    """Answered with the failure `fail_next` asked for."""


class ScriptedDiscord(ThreadedServer):
    """Discord's REST API and Gateway for one bot. Thread-safe for test code."""

    ws_protocol = "websockets-sansio"

    def __init__(
        self,
        *,
        token: str = "NODMIX.test.token",
        host: str = "127.0.0.1",
        queue_offline: bool = True,
        message_content: bool = True,
    ) -> None:
        super().__init__(host=host, port=0)
        self.token = token
        self.bot: dict[str, Any] = p.user(p.snowflake(), "Nodmix Bot", bot=True)
        self.app_id: str = self.bot["id"]
        self.owner: dict[str, Any] = p.user(p.snowflake(), "Owner")
        self.guild_id = p.snowflake()
        self.channel_ids = [p.snowflake(), p.snowflake()]
        self.thread_id = p.snowflake()
        self.calls: list[DiscordCall] = []
        self.files: dict[str, bytes] = {}
        self.commands: list[dict[str, Any]] = []
        self._dms: dict[str, str] = {}
        self._lock = threading.Lock()
        self.gateway = GatewayHub(
            token=token,
            greeting=self._greeting,
            call_soon=self._call_soon,
            queue_offline=queue_offline,
            allowed_intents=lambda: ~0 if self.message_content else ~MESSAGE_CONTENT_INTENT,
        )
        self.message_content = message_content
        """Whether the Message Content intent is switched on for the app (else an IDENTIFY
        asking for it is closed with 4014, as Discord does)."""
        self.history: dict[str, list[dict[str, Any]]] = {}
        """Messages per channel id, oldest first (`GET /channels/{id}/messages`)."""
        self._failures: dict[str, list[tuple[int, float]]] = {}
        self._interaction_channels: dict[str, str] = {}

    # ---- test API -------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The `apiBaseUrl` to configure (REST, version included)."""
        return f"http://{self.host}:{self.port}/api/v10"

    def dm_channel(self, user_id: str) -> str:
        """The DM channel id between the bot and `user_id`."""
        with self._lock:
            return self._dms.setdefault(str(user_id), p.snowflake())

    def inject_dm(
        self, *, sender_id: str, text: str, sender_name: str = "Test User", **kw: Any
    ) -> str:
        """A direct message from `sender_id`; the message id."""
        return self._inject(self.dm_channel(sender_id), None, sender_id, sender_name, text, **kw)

    def inject_guild(
        self,
        *,
        channel_id: str,
        sender_id: str,
        text: str,
        sender_name: str = "Test User",
        **kw: Any,
    ) -> str:
        """A message in a guild channel or thread; the message id."""
        return self._inject(channel_id, self.guild_id, sender_id, sender_name, text, **kw)

    def _inject(
        self,
        channel_id: str,
        guild_id: str | None,
        sender_id: str,
        sender_name: str,
        text: str,
        *,
        mention: bool = False,
        reply_to_bot: bool = False,
        attachment: tuple[str, bytes] | None = None,
    ) -> str:
        author = p.user(str(sender_id), sender_name)
        mentions = [self.bot] if mention else []
        if mention:
            text = f"<@{self.bot['id']}> {text}"
        files = []
        if attachment is not None:
            name, content = attachment
            file_id = p.snowflake()
            self.files[file_id] = content
            files.append(
                {
                    "id": file_id,
                    "filename": name,
                    "size": len(content),
                    "url": f"http://{self.host}:{self.port}/attachments/{file_id}/{name}",
                    "proxy_url": f"http://{self.host}:{self.port}/attachments/{file_id}/{name}",
                    "content_type": mimetypes.guess_type(name)[0] or "application/octet-stream",
                }
            )
        referenced = None
        if reply_to_bot:
            referenced = p.message(
                message_id=p.snowflake(), channel_id=channel_id, author=self.bot, content="earlier"
            )
        message_id = p.snowflake()
        data = p.message(
            message_id=message_id,
            channel_id=channel_id,
            author=author,
            content=text,
            guild_id=guild_id,
            mentions=mentions,
            attachments=files,
            referenced=referenced,
        )
        with self._lock:
            rest = {k: v for k, v in data.items() if k not in ("guild_id", "member")}
            self.history.setdefault(channel_id, []).append(rest)  # REST shapes omit the guild
        self.dispatch("MESSAGE_CREATE", data)
        return message_id

    def inject_command(self, name: str, *, sender_id: str, channel_id: str | None = None) -> str:
        """A slash command (`/name`) in a DM (no `channel_id`) or a guild channel."""
        person = p.user(str(sender_id), "Test User")
        command = next((c for c in self.commands if c["name"] == name), {"id": "0", "name": name})
        channel: dict[str, Any]
        if channel_id is None:
            channel = {"id": self.dm_channel(sender_id), "type": p.DM_CHANNEL}
            guild_id = None
        else:
            channel = p.text_channel(channel_id, self.guild_id, "general")
            guild_id = self.guild_id
        interaction_id = p.snowflake()
        with self._lock:
            self._interaction_channels[interaction_id] = channel["id"]
        self.dispatch(
            "INTERACTION_CREATE",
            p.interaction(
                interaction_id=interaction_id,
                app_id=self.app_id,
                token=f"itoken-{interaction_id}",
                command=command,
                person=person,
                channel=channel,
                guild_id=guild_id,
            ),
        )
        return interaction_id

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Queue a Gateway dispatch for the ready session."""
        self.gateway.dispatch(event, data)

    def replay(self) -> int:
        """Dispatch every MESSAGE_CREATE sent so far once more (as a resumed session may get
        them again); how many."""
        return self.gateway.replay("MESSAGE_CREATE")

    @property
    def app_flags(self) -> int:
        """The application's flags (the Message Content intent's, when on)."""
        return p.MESSAGE_CONTENT_LIMITED if self.message_content else 0

    def drop_sessions(self) -> None:
        """Close the Gateway connections (the client must reconnect and identify again)."""
        self.gateway.drop()

    @property
    def identifies(self) -> int:
        """IDENTIFY payloads received (refused ones too)."""
        return self.gateway.identifies

    @property
    def sessions_ready(self) -> int:
        """Gateway sessions that identified."""
        return self.gateway.sessions_ready

    def fail_next(self, route: str, *, status: int = 429, retry_after: float = 1.0) -> None:
        """Make the next call of `route` (`POST /channels/{id}/messages`) fail."""
        with self._lock:
            self._failures.setdefault(route, []).append((status, retry_after))

    def calls_of(self, route: str) -> list[DiscordCall]:
        """Recorded calls of one route."""
        with self._lock:
            return [c for c in self.calls if c.route == route]

    def sent(self, channel_id: str | None = None) -> list[dict[str, Any]]:
        """Messages the bot posted (channel messages and interaction follow-ups)."""
        calls = self.calls_of("POST /channels/{id}/messages")
        calls += self.calls_of("POST /webhooks/{app}/{token}")
        out = [
            c.body
            for c in calls
            if not c.failed and (channel_id is None or c.params.get("channel") == str(channel_id))
        ]
        return sorted(out, key=lambda b: int(b.get("id", 0)))

    def sent_texts(self, channel_id: str | None = None) -> list[str]:
        """The text of each posted message (an embed's description when it has no content)."""
        texts = []
        for body in self.sent(channel_id):
            embeds = body.get("embeds") or []
            texts.append(
                body.get("content") or (embeds[0].get("description", "") if embeds else "")
            )
        return texts

    def pending_events(self) -> int:
        """Injected events not yet dispatched to a session."""
        return self.gateway.pending()

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        return "calls: " + ", ".join(c.route for c in self.calls[-15:])

    # ---- gateway --------------------------------------------------------------------------

    def _before_stop(self) -> None:
        self.gateway.stop()

    def _greeting(self) -> list[tuple[str, dict[str, Any]]]:
        ready = {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": self.guild_id, "unavailable": True}],
            "session_id": p.snowflake(),
            "resume_gateway_url": f"ws://{self.host}:{self.port}/gateway",
            "application": {"id": self.app_id, "flags": self.app_flags},
            "private_channels": [],
        }
        channels = [
            p.text_channel(c, self.guild_id, f"room-{i}") for i, c in enumerate(self.channel_ids)
        ]
        threads = [p.thread(self.thread_id, self.channel_ids[0], self.guild_id, self.owner["id"])]
        guild = p.guild(self.guild_id, self.owner["id"], channels, threads)
        return [("READY", ready), ("GUILD_CREATE", guild)]

    # ---- REST -----------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        """The Starlette app."""
        api = "/api/v10"
        return Starlette(
            routes=[
                WebSocketRoute("/gateway", self.gateway.session),
                Route("/attachments/{id}/{name}", self._attachment),
                Route(api + "/{path:path}", self._rest, methods=["GET", "POST", "PUT", "PATCH"]),
            ]
        )

    async def _attachment(self, request: Request) -> Response:
        data = self.files.get(request.path_params["id"])
        return Response(status_code=404) if data is None else Response(data)

    async def _body(self, request: Request) -> Any:
        if request.headers.get("content-type", "").startswith("multipart/"):
            form = await request.form()
            body: dict[str, Any] = {}
            files = []
            for key, value in form.multi_items():
                if key == "payload_json" and isinstance(value, str):
                    body.update(json.loads(value))
                elif not isinstance(value, str):
                    files.append(
                        {"filename": value.filename, "data": (await value.read()).decode("latin-1")}
                    )
            body["files"] = files
            return body
        raw = await request.body()
        return json.loads(raw) if raw else None

    async def _rest(self, request: Request) -> Response:
        path = "/" + request.path_params["path"]
        route, params = p.match_route(request.method, path)
        params.update({f"query_{k}": v for k, v in request.query_params.items()})
        body = await self._body(request)
        with self._lock:
            failures = self._failures.get(route)
            failure = failures.pop(0) if failures else None
            self.calls.append(DiscordCall(route, params, body, failed=failure is not None))
        auth = request.headers.get("authorization", "")
        if (
            not route.startswith(("POST /webhooks", "POST /interactions"))
            and auth != f"Bot {self.token}"
        ):
            return JSONResponse({"message": "401: Unauthorized", "code": 0}, status_code=401)
        if failure is not None:
            status, retry_after = failure
            return JSONResponse(
                {
                    "message": "You are being rate limited.",
                    "retry_after": retry_after,
                    "global": False,
                },
                status_code=status,
                headers={
                    "Retry-After": str(retry_after),
                    "X-RateLimit-Scope": "user",
                    "Via": "1.1 google",
                },
            )
        handler = ROUTES.get(route)
        if handler is None:
            return JSONResponse({"message": "404: Not Found", "code": 0}, status_code=404)
        result = handler(self, params, body)
        if result is None and request.method == "GET":
            return JSONResponse({"message": "Unknown Channel", "code": 10003}, status_code=404)
        if result is None:
            return Response(status_code=204)
        return JSONResponse(result)
