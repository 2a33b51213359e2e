"""A scripted Telegram Bot API server on a real socket, for tests and demos.

It speaks the Bot API's HTTP shape, `POST /bot<token>/<method>` (JSON, form or multipart
parameters) answered with `{"ok": true, "result": ...}`, for the methods Nodmix uses: getMe,
getUpdates (long poll honouring `offset` and `timeout`), sendMessage, sendChatAction,
editMessageText, sendDocument, getFile and file downloads (`/file/bot<token>/<path>`).
Every call is recorded in `calls`; tests inject updates with `inject_text()` and make the next
calls of a method fail with `fail_next()` (a 429 with `retry_after`, for example)::

    with ScriptedBotAPI() as api:                       # on a background thread
        config = {"channels": {"telegram": {"botToken": api.token, "apiBaseUrl": api.url}}}
        api.inject_text(chat_id=42, sender_id=42, text="hello")
        api.wait_for(lambda: api.sent_texts(42))

Runnable from a shell too: `python -m nodmix.testing.telegram_server --port 8081` prints the
`config set` line for it, then sends each line typed on stdin as a message from user 42 and
prints what the bot sends (`nodmix.testing.telegram_chat`).
"""

from __future__ import annotations

import argparse
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

T = TypeVar("T")
_RAW_PARAMS = frozenset({"text", "caption"})


@dataclass
class BotCall:
    """One recorded API call."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.time)


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: int | None


class ScriptedBotAPI(ThreadedServer):
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
        self._updates: list[dict[str, Any]] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._lock = threading.Lock()
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._changed: anyio.Event | None = None
        self._closing = False

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
        if mention:
            text = f"@{self.username} {text}"
        message: dict[str, Any] = {
            "chat": {"id": chat_id, "type": chat_type, "title": f"chat {chat_id}"},
            "from": {"id": sender_id, "is_bot": False, "first_name": sender_name},
        }
        if document is not None:
            name, data = document
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = data
            message["document"] = {
                "file_id": file_id,
                "file_unique_id": file_id,
                "file_name": name,
                "file_size": len(data),
            }
            message["caption"] = text
        else:
            message["text"] = text
        if mention:
            message["entities" if document is None else "caption_entities"] = [
                {"type": "mention", "offset": 0, "length": len(self.username) + 1}
            ]
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to_bot:
            message["reply_to_message"] = {
                "message_id": 1,
                "date": int(time.time()),
                "chat": message["chat"],
                "from": self._me(),
                "text": "earlier answer",
            }
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

    def pending_updates(self) -> int:
        """Injected updates not yet confirmed by an offset."""
        with self._lock:
            return len(self._updates)

    def wait_for(self, check: Callable[[], T], *, timeout: float = 15.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout}s; calls: {self._summary()}")
            time.sleep(0.02)

    def _summary(self) -> str:
        with self._lock:
            return ", ".join(
                f"{c.method}({c.params.get('text', '')!r:.40})" for c in self.calls[-20:]
            )

    # ---- server ---------------------------------------------------------------------------

    def _wake(self) -> None:
        event = self._changed
        if event is not None and self._loop_token is not None:
            self._call_soon(event.set)

    def _before_stop(self) -> None:
        self._closing = True
        if self._changed is not None:
            self._changed.set()

    def _me(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Nodmix Test",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

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
        form = await request.form()
        params: dict[str, Any] = {}
        for key, value in form.multi_items():
            if not isinstance(value, str):
                params[key] = {"filename": value.filename, "size": len(await value.read())}
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
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401
            )
        method = request.path_params["method"]
        params = await self._params(request)
        with self._lock:
            self.calls.append(BotCall(method, params))
            failures = self._failures.get(method)
            failure = failures.pop(0) if failures else None
        if failure is not None:
            body: dict[str, Any] = {
                "ok": False,
                "error_code": failure.status,
                "description": failure.description,
            }
            if failure.retry_after is not None:
                body["parameters"] = {"retry_after": failure.retry_after}
            return JSONResponse(body, status_code=failure.status)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return JSONResponse(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status_code=404
            )
        return JSONResponse({"ok": True, "result": await handler(params)})

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
        return self._sent(params, text=str(params.get("text", "")))

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        return self._sent(params, text=str(params.get("text", "")))

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

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        data = self.files.get(file_id, b"")
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(data),
            "file_path": f"documents/{file_id}.bin",
        }

    async def _file(self, request: Request) -> Response:
        path = request.path_params["path"]
        file_id = path.rsplit("/", 1)[-1].removesuffix(".bin")
        if request.path_params["token"] != self.token or file_id not in self.files:
            return Response(status_code=404)
        return Response(self.files[file_id], media_type="application/octet-stream")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m nodmix.testing.telegram_server`: serve until Ctrl-C, chatting on stdin."""
    from nodmix.invocation import nodmix_command
    from nodmix.testing.telegram_chat import run_shell, setup_lines

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8081, help="0 picks a free port")
    parser.add_argument("--token", default="123456:TEST-token")
    parser.add_argument(
        "--chat-id", type=int, default=42, help="the Telegram user id your typed lines come from"
    )
    args = parser.parse_args(argv)
    server = ScriptedBotAPI(token=args.token, port=args.port, max_poll_seconds=25)
    with server:
        print("\n".join(setup_lines(server, nodmix_command())), flush=True)
        try:
            run_shell(server, sys.stdin, sys.stdout, args.chat_id)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
