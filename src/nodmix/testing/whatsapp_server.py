"""A scripted WhatsApp Cloud API on a real socket: the Graph API calls Nodmix makes, and a
webhook sender that signs each update with the app secret and posts it as Meta does.

Graph API (`<url>/v<version>/...`, bearer token checked, Graph-shaped errors): the business
number (`GET /<phone id>`), messages (`POST /<phone id>/messages`: text, audio, image,
document, read receipts and typing indicators), media upload (`POST /<phone id>/media`), media
URLs (`GET /<media id>`) and downloads (`GET /download/<media id>`). A free-form message to a
user whose window the test closed (`close_window()`) is accepted and then reported `failed`
with error 131047 through the webhook, as Meta does. `fail_next()` makes the next calls answer
a status (a 500) or hang (`hang=True`) until the client gives up.

Webhook: `inject_text()` / `inject_media()` queue updates that are POSTed, in order, to
`webhook_url` with `X-Hub-Signature-256`, each again until answered 200 (`deliveries`
records every attempt). `post()` sends raw bytes with any signature (a forgery, a replay)
from the test's thread and returns the status. Set `webhook_url` to the gateway's
`<url>/whatsapp`, then `inject_text(...)` and `wait_for(lambda: sent_texts(...))`.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodmix.channels.whatsapp.signature import sign
from nodmix.testing import whatsapp_payloads as payloads
from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until

T = TypeVar("T")
REDELIVER_SECONDS = 0.2
POST_TIMEOUT_SECONDS = 10.0


class ScriptedWhatsApp(ThreadedServer):
    """The Graph API and Meta's webhook sender. Thread-safe for test code."""

    def __init__(
        self,
        *,
        token: str = "EAAG-test-token",
        phone_number_id: str = "106540352242922",
        display_number: str = "+1 555-010-0000",
        verified_name: str = "Nodmix Test",
        app_secret: str = "test-app-secret",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host=host, port=port)
        self.token = token
        self.phone_number_id = phone_number_id
        self.display_number = display_number
        self.verified_name = verified_name
        self.app_secret = app_secret
        self.webhook_url: str | None = None
        self.calls: list[payloads.GraphCall] = []
        self.media: dict[str, tuple[bytes, str]] = {}
        self.downloads: list[str] = []
        self.deliveries: list[payloads.Delivery] = []
        self._queue: list[bytes] = []
        self._sent: list[bytes] = []
        self._closed_windows: set[str] = set()
        self._failures: list[int | None] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._wake_event: anyio.Event | None = None
        self._stopping: anyio.Event | None = None
        """Set when the server stops: ends the requests `fail_next(hang=True)` holds."""

    # ---- test API -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The `apiBaseUrl` to configure."""
        return f"http://{self.host}:{self.port}"

    def config(self, **extra: Any) -> dict[str, Any]:
        """A `channels.whatsapp` section pointing at this server."""
        return {
            "phoneNumberId": self.phone_number_id,
            "accessToken": self.token,
            "appSecret": self.app_secret,
            "verifyToken": "verify-me",
            "apiBaseUrl": self.url,
            **extra,
        }

    def inject(self, update: dict[str, Any]) -> int:
        """Queue an update for the webhook; its index (for `post_again`)."""
        body = json.dumps(update).encode()
        with self._lock:
            self._queue.append(body)
            self._sent.append(body)
            index = len(self._sent) - 1
        self._wake()
        return index

    def inject_text(
        self,
        sender: str,
        text: str,
        *,
        name: str = "Ann",
        group_id: str | None = None,
        mention: bool = False,
        reply_to: str | None = None,
        sent_at: float | None = None,
    ) -> int:
        """Queue a text message from `sender` (a wa_id); `mention` prefixes `@<number>`,
        `reply_to` quotes a message id of the business."""
        if mention:
            text = f"@{''.join(c for c in self.display_number if c.isdigit())} {text}"
        quoted = (reply_to, self.display_digits) if reply_to is not None else None
        message = payloads.text(text, group_id=group_id, reply_to=quoted)
        if sent_at is not None:
            message["timestamp"] = str(int(sent_at))
        return self.inject(self._inbound(sender, name, message))

    def inject_media(
        self,
        sender: str,
        kind: str,
        data: bytes,
        mime_type: str,
        *,
        name: str = "Ann",
        **extra: Any,
    ) -> int:
        """Queue an image, audio (`voice=True`), document or video message with `data`."""
        media_id = self._store(data, mime_type)
        return self.inject(
            self._inbound(sender, name, payloads.media(kind, media_id, mime_type, **extra))
        )

    def post(
        self, body: bytes, *, signature: str | None = "sign", headers: dict[str, str] | None = None
    ) -> int:
        """POST raw bytes to the webhook from the test's thread (`signature="sign"`: the real
        one, None: no header, else that header value); the status."""
        assert self.webhook_url is not None
        sent = dict(headers or {})
        if signature == "sign":
            sent["X-Hub-Signature-256"] = sign(body, self.app_secret)
        elif signature is not None:
            sent["X-Hub-Signature-256"] = signature
        sent.setdefault("Content-Type", "application/json")
        with httpx2.Client(timeout=POST_TIMEOUT_SECONDS) as client:
            return client.post(self.webhook_url, content=body, headers=sent).status_code

    def post_again(self, index: int) -> int:
        """POST an update delivered before, signed as it was (a redelivery or a replay)."""
        with self._lock:
            body = self._sent[index]
        return self.post(body)

    def verify(self, token: str, challenge: str = "1158201444") -> tuple[int, str]:
        """Meta's subscription check against the webhook URL; `(status, body)`."""
        assert self.webhook_url is not None
        query = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
        with httpx2.Client(timeout=POST_TIMEOUT_SECONDS) as client:
            response = client.get(self.webhook_url, params=query)
        return response.status_code, response.text

    def close_window(self, user: str) -> None:
        """Treat `user` as not having written for 24 hours (sends to them then fail)."""
        with self._lock:
            self._closed_windows.add(user)

    def fail_next(self, times: int = 1, *, status: int = 500, hang: bool = False) -> None:
        """The next `times` Graph API calls answer `status` (or never answer)."""
        with self._lock:
            self._failures.extend([None if hang else status] * times)

    def messages(self, to: str | None = None) -> list[dict[str, Any]]:
        """Messages the business sent (not receipts or typing; not calls answered with a
        failure), oldest first."""
        with self._lock:
            calls = list(self.calls)
        return [
            c.body
            for c in calls
            if c.answered
            and c.path.endswith("/messages")
            and c.body.get("type")
            and (to is None or c.body.get("to") == to)
        ]

    def sent_texts(self, to: str | None = None) -> list[str]:
        """Bodies of the text messages sent (to one chat)."""
        return [m["text"]["body"] for m in self.messages(to) if m.get("type") == "text"]

    def receipts(self) -> list[dict[str, Any]]:
        """Read receipts and typing indicators."""
        with self._lock:
            return [c.body for c in self.calls if c.body.get("status") == "read"]

    @property
    def display_digits(self) -> str:
        return "".join(c for c in self.display_number if c.isdigit())

    def wait_for(self, check: Callable[[], T], *, timeout: float = 15.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        with self._lock:
            return f"calls: {[f'{c.method} {c.path}' for c in self.calls[-10:]]}"

    # ---- internals ------------------------------------------------------------------------

    def _inbound(self, sender: str, name: str, message: dict[str, Any]) -> dict[str, Any]:
        return payloads.inbound(
            phone_number_id=self.phone_number_id,
            display_number=self.display_number,
            sender=sender,
            name=name,
            message=message,
        )

    def _store(self, data: bytes, mime_type: str) -> str:
        media_id = f"{next(self._ids) + 900_000_000}"
        with self._lock:
            self.media[media_id] = (data, mime_type)
        return media_id

    def _wake(self) -> None:
        event = self._wake_event
        if event is not None:
            self._call_soon(event.set)

    def _before_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self._stopping = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._deliver)
            await super()._serve(task_status=task_status)
            group.cancel_scope.cancel()

    async def _deliver(self) -> None:
        """POST queued updates in order, each until answered 200 (as Meta retries)."""
        async with httpx2.AsyncClient(timeout=POST_TIMEOUT_SECONDS) as client:
            while True:
                with self._lock:
                    self._wake_event = wake = anyio.Event()
                    body = self._queue[0] if self._queue and self.webhook_url else None
                    url = self.webhook_url
                    index = self._sent.index(body) if body is not None else -1
                if body is None or url is None:
                    await wake.wait()
                    continue
                headers = {
                    "X-Hub-Signature-256": sign(body, self.app_secret),
                    "Content-Type": "application/json",
                }
                try:
                    status = (await client.post(url, content=body, headers=headers)).status_code
                except httpx2.HTTPError:
                    status = 0
                with self._lock:
                    self.deliveries.append(payloads.Delivery(index, status))
                    if status == 200 and self._queue and self._queue[0] is body:
                        self._queue.pop(0)
                if status != 200:
                    with anyio.move_on_after(REDELIVER_SECONDS):
                        await wake.wait()

    def build_app(self) -> Starlette:
        """The Starlette app."""
        return Starlette(
            routes=[
                Route("/download/{media_id}", self._download, methods=["GET"]),
                Route("/{version}/{node}", self._node, methods=["GET"]),
                Route("/{version}/{node}/messages", self._message, methods=["POST"]),
                Route("/{version}/{node}/media", self._upload, methods=["POST"]),
            ]
        )

    async def _checked(self, request: Request, body: dict[str, Any]) -> Response | None:
        """Record the call; an auth or injected failure as the answer, if any."""
        call = payloads.GraphCall(request.method, request.url.path, body)
        with self._lock:
            self.calls.append(call)
            failure = self._failures.pop(0) if self._failures else 0
        if failure is None and self._stopping is not None:
            await self._stopping.wait()  # the client's timeout ends it (or the server's stop)
            return Response(status_code=503)
        if failure:
            return JSONResponse(
                payloads.graph_error(2, "Service temporarily unavailable"), status_code=failure
            )
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse(
                payloads.graph_error(190, "Invalid OAuth access token"), status_code=401
            )
        call.answered = True
        return None

    async def _node(self, request: Request) -> Response:
        node = request.path_params["node"]
        refused = await self._checked(request, dict(request.query_params))
        if refused is not None:
            return refused
        if node == self.phone_number_id:
            return JSONResponse(
                {
                    "id": self.phone_number_id,
                    "display_phone_number": self.display_number,
                    "verified_name": self.verified_name,
                    "quality_rating": "GREEN",
                }
            )
        with self._lock:
            stored = self.media.get(node)
        if stored is None:
            return JSONResponse(
                payloads.graph_error(100, f"Unsupported get request: {node}"), status_code=400
            )
        data, mime = stored
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "url": f"{self.url}/download/{node}",
                "mime_type": mime,
                "sha256": "0" * 64,
                "file_size": len(data),
                "id": node,
            }
        )

    async def _message(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"{}")
        refused = await self._checked(request, body)
        if refused is not None:
            return refused
        if body.get("status") == "read":
            return JSONResponse({"success": True})
        wamid = payloads.message_id()
        to = str(body.get("to", ""))
        with self._lock:
            closed = to in self._closed_windows
        if closed:  # accepted, then reported failed through the webhook, as Meta does
            self.inject(
                payloads.failed_status(
                    phone_number_id=self.phone_number_id,
                    display_number=self.display_number,
                    message_id=wamid,
                    recipient=to,
                    code=131047,
                )
            )
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}],
            }
        )

    async def _upload(self, request: Request) -> Response:
        async with request.form() as form:
            upload = form.get("file")
            mime = str(form.get("type") or "application/octet-stream")
            data = (
                await upload.read() if upload is not None and not isinstance(upload, str) else b""
            )
            name = getattr(upload, "filename", None)
        refused = await self._checked(request, {"upload": name, "type": mime, "size": len(data)})
        if refused is not None:
            return refused
        return JSONResponse({"id": self._store(data, mime)})

    async def _download(self, request: Request) -> Response:
        refused = await self._checked(request, {})
        if refused is not None:
            return refused
        media_id = request.path_params["media_id"]
        with self._lock:
            stored = self.media.get(media_id)
            self.downloads.append(media_id)
        if stored is None:
            return Response(status_code=404)
        return Response(stored[0], media_type=stored[1])
