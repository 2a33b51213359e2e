"""A scripted Telegram Bot API server on a real socket, for tests and demos.

It speaks the Bot API's HTTP shape, `POST /bot<token>/<method>` (JSON, form or multipart
parameters) answered with `{"ok": true, "result": ...}`, for the methods Nodmix uses: getMe,
getUpdates (long poll honouring `offset` and `timeout`), sendMessage, sendChatAction,
editMessageText, sendDocument, sendVoice, sendAudio, getFile and file downloads
(`/file/bot<token>/<path>`), and setWebhook/deleteWebhook/getWebhookInfo. Every call is
recorded in `calls` (uploaded files with their bytes: `sent_files()`); tests inject updates
with `inject_text()` and `inject_media()` (photos, voice notes, ...; `telegram_files.py`) and
make the next calls of a method fail with `fail_next()` (a 429 with `retry_after`, for
example)::

    with ScriptedBotAPI() as api:                       # on a background thread
        config = {"channels": {"telegram": {"botToken": api.token, "apiBaseUrl": api.url}}}
        api.inject_text(chat_id=42, sender_id=42, text="hello")
        api.wait_for(lambda: api.sent_texts(42))

While a webhook is set, injected updates are not offered to getUpdates (which answers 409,
as Telegram does) but POSTed to the webhook URL with `X-Telegram-Bot-Api-Secret-Token`, in
order, each again until it is answered 200 (`hook.deliveries` records every attempt).
`hook.proxy` stands for the reverse proxy in front of a gateway: it replaces the scheme,
host and port of the registered URL, so a test can register `https://bot.example.org/...`
and still reach a gateway on 127.0.0.1. `post_webhook()` posts an update by hand (a
redelivery, a wrong secret) and returns the status.

Runnable from a shell too: `python -m nodmix.testing.telegram_server --port 8081` prints the
`config set` line for it, then sends each line typed on stdin as a message from user 42 and
prints what the bot sends (`nodmix.testing.telegram_chat`).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until
from nodmix.testing.telegram_files import BotFiles
from nodmix.testing.telegram_payloads import bot_user, text_message
from nodmix.testing.telegram_webhook import WebhookPoster

T = TypeVar("T")
_RAW_PARAMS = frozenset({"text", "caption"})


@dataclass
class BotCall:
    """One recorded API call."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.time)
    peer: str | None = None
    """The client's `host:port` (which process called, with its sockets)."""


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: int | None


class ScriptedBotAPI(BotFiles, ThreadedServer):
    """A Bot API server with an injectable update queue. Thread-safe for test code."""

    def __init__(
        self,
        *,
        token: str = "123456:TEST-token",
        username: str = "nodmix_test_bot",
        bot_id: int = 900001,
        host: str = "127.0.0.1",
        port: int = 0,
        max_poll_seconds: float = 1.0,
    ) -> None:
        super().__init__(host=host, port=port)
        self.token = token
        self.username = username
        self.bot_id = bot_id
        self.max_poll_seconds = max_poll_seconds
        self.calls: list[BotCall] = []
        self.files: dict[str, bytes] = {}
        self.file_paths: dict[str, str] = {}
        self.file_sizes: dict[str, int] = {}
        self.downloads: list[str] = []
        """File ids whose content was downloaded."""
        self._updates: list[dict[str, Any]] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._lock = threading.Lock()
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._changed: anyio.Event | None = None
        self._closing = False
        self.hook = WebhookPoster(self._lock, lambda: self._updates)
        """The registered webhook, its proxy and the POSTs made to it."""
        self._texts: dict[tuple[str, int], str] = {}

    # ---- test API -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The `apiBaseUrl` to configure."""
        return f"http://{self.host}:{self.port}"

    def inject(self, message: dict[str, Any]) -> int:
        """Queue an update carrying `message`; its update id."""
        with self._lock:
            update_id = next(self._update_ids)
            message.setdefault("message_id", next(self._message_ids))
            message.setdefault("date", int(time.time()))
            self._updates.append({"update_id": update_id, "message": message})
        self._wake()
        return update_id

    def inject_text(
        self,
        *,
        chat_id: int,
        sender_id: int,
        text: str,
        chat_type: str = "private",
        sender_name: str = "Test User",
        thread_id: int | None = None,
        mention: bool = False,
        reply_to_bot: bool = False,
        document: tuple[str, bytes] | None = None,
    ) -> int:
        """Queue a text message (with `mention`, prefixed by `@<bot username> `)."""
        file_id = f"file-{len(self.files) + 1}"
        message = text_message(
            chat=(chat_id, chat_type),
            sender=(sender_id, sender_name),
            text=text,
            bot=self._me(),
            thread_id=thread_id,
            mention=mention,
            reply_to_bot=reply_to_bot,
            document=(file_id, *document) if document is not None else None,
        )
        if document is not None:
            self.files[file_id] = document[1]
        return self.inject(message)

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        description: str = "Too Many Requests",
        retry_after: int | None = 1,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls of `method` fail."""
        with self._lock:
            self._failures.setdefault(method, []).extend(
                _Failure(status, description, retry_after) for _ in range(times)
            )

    def calls_of(self, method: str) -> list[BotCall]:
        """Recorded calls of one method."""
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def sent_texts(self, chat_id: int | str | None = None) -> list[str]:
        """Texts sent with sendMessage (to one chat)."""
        return [
            str(c.params.get("text", ""))
            for c in self.calls_of("sendMessage")
            if chat_id is None or str(c.params.get("chat_id")) == str(chat_id)
        ]

    def message_texts(self, chat_id: int | str) -> list[str]:
        """What each message the bot sent to `chat_id` shows now (after edits), oldest first."""
        with self._lock:
            return [t for (chat, _), t in sorted(self._texts.items()) if chat == str(chat_id)]

    def post_webhook(self, update: int | dict[str, Any], *, secret: str | None = None) -> int:
        """POST an update (one delivered before, by id: a redelivery) to the webhook, with
        the registered secret or `secret`; the status it answered."""
        return self.hook.post(update, secret)

    def pending_updates(self) -> int:
        """Injected updates not yet confirmed by an offset."""
        with self._lock:
            return len(self._updates)

    def wait_for(self, check: Callable[[], T], *, timeout: float = 15.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        return f"calls: {self._summary()}"

    def _summary(self) -> str:
        with self._lock:
            return ", ".join(
                f"{c.method}({c.params.get('text', '')!r:.40})" for c in self.calls[-20:]
            )

    # ---- server ---------------------------------------------------------------------------

    def _wake(self) -> None:
        for event in (self._changed, self.hook.wake_event()):
            if event is not None and self._loop_token is not None:
                self._call_soon(event.set)

    async def _serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self.hook.run)
            await super()._serve(task_status=task_status)
            group.cancel_scope.cancel()

    def _before_stop(self) -> None:
        self._closing = True
        if self._changed is not None:
            self._changed.set()

    def _me(self) -> dict[str, Any]:
        return bot_user(self.bot_id, self.username)

    def build_app(self) -> Starlette:
        """The Starlette app."""
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._method, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
            ]
        )

    async def _params(self, request: Request) -> dict[str, Any]:
        if request.headers.get("content-type", "").startswith("application/json"):
            body = await request.body()
            return dict(json.loads(body)) if body else {}
        params: dict[str, Any] = {}
        async with request.form() as form:
            for key, value in form.multi_items():
                if not isinstance(value, str):
                    data = await value.read()
                    params[key] = {"filename": value.filename, "size": len(data), "data": data}
                elif key in _RAW_PARAMS:
                    params[key] = value
                else:
                    try:
                        params[key] = json.loads(value)
                    except ValueError:
                        params[key] = value
        params.update(request.query_params)
        return params

    async def _method(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        params = await self._params(request)
        with self._lock:
            peer = f"{request.client.host}:{request.client.port}" if request.client else None
            self.calls.append(BotCall(method, params, peer=peer))
            failures = self._failures.get(method)
            failure = failures.pop(0) if failures else None
        if failure is not None:
            return _error(failure.status, failure.description, failure.retry_after)
        if method == "getUpdates" and self.hook.webhook is not None:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        try:
            result = await handler(params)
        except _BadRequest as exc:
            return _error(400, f"Bad Request: {exc}")
        return JSONResponse({"ok": True, "result": result})

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return self._me()

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), self.max_poll_seconds)
        deadline = anyio.current_time() + timeout
        while True:
            with self._lock:
                if offset:
                    self._updates = [u for u in self._updates if u["update_id"] >= offset]
                ready = list(self._updates)
                self._changed = anyio.Event()
                changed = self._changed
            remaining = deadline - anyio.current_time()
            if ready or remaining <= 0 or self._closing:
                return ready[: int(params.get("limit") or 100)]
            with anyio.move_on_after(remaining):
                await changed.wait()

    def _sent(self, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if int(chat_id or 0) > 0 else "supergroup"},
            "from": self._me(),
            **extra,
        }
        if params.get("message_thread_id") is not None:
            message["message_thread_id"] = params["message_thread_id"]
        return message

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        message = self._sent(params, text=str(params.get("text", "")))
        with self._lock:
            self._texts[(str(params.get("chat_id")), message["message_id"])] = message["text"]
        return message

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        key = (str(params.get("chat_id")), int(params.get("message_id") or 0))
        text = str(params.get("text", ""))
        with self._lock:
            if key not in self._texts:
                raise _BadRequest("message to edit not found")
            if self._texts[key] == text:
                raise _BadRequest("message is not modified")
            self._texts[key] = text
        message = self._sent(params, text=text)
        message["message_id"] = key[1]
        message["edit_date"] = int(time.time())
        return message

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        with self._lock:
            self.hook.webhook = dict(params)
        self._wake()
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        with self._lock:
            self.hook.webhook = None
        return True

    async def _m_getWebhookInfo(self, params: dict[str, Any]) -> Any:
        with self._lock:
            hook = self.hook.webhook or {}
            return {"url": hook.get("url", ""), "pending_update_count": len(self._updates)}

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        doc = params.get("document") or {}
        name = doc.get("filename") if isinstance(doc, dict) else None
        return self._sent(
            params,
            document={
                "file_id": "sent-doc",
                "file_unique_id": "sent-doc",
                "file_name": name or "file",
            },
        )


class _BadRequest(Exception):
    """A method refused its parameters (answered 400, as Telegram does)."""


def _error(status: int, description: str, retry_after: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return JSONResponse(body, status_code=status)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m nodmix.testing.telegram_server`: serve until Ctrl-C, chatting on stdin."""
    from nodmix.testing.telegram_chat import serve_and_chat

    return serve_and_chat(ScriptedBotAPI, argv, description=__doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
