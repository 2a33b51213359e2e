"""An aioimaplib connection that hears every new-mail announcement.

An IMAP server takes in mail delivered between two commands only when it ends the next
command: that command's results (a SEARCH's UIDs) do not hold the mail yet, and its response
announces it with an untagged `* N EXISTS`. aioimaplib passes such a line on only to a
pending IDLE, NOOP or synchronous command; during UID SEARCH or FETCH it drops it, and an
IDLE started afterwards does not announce the mail again. This client sets `announced`
whenever the server announces new mail, whatever command is pending, so the adapter can tell
"nothing new" from "new mail the last search could not see yet".
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Callable
from typing import Any

import aioimaplib

_EXISTS = re.compile(rb"\* \d+ EXISTS\s*$", re.IGNORECASE)


class _Protocol(aioimaplib.IMAP4ClientProtocol):  # type: ignore[misc]
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        conn_lost_cb: Callable[[Exception | None], None] | None,
        announced: asyncio.Event,
    ) -> None:
        super().__init__(loop, conn_lost_cb)
        self._announced = announced

    def _handle_line(self, line: bytes, current_cmd: Any) -> Any:
        # every response line (literals excepted) passes here, before it is routed or dropped
        if _EXISTS.match(line):
            self._announced.set()
        return super()._handle_line(line, current_cmd)


class ImapConnection(aioimaplib.IMAP4):  # type: ignore[misc]
    """`aioimaplib.IMAP4` (plain or TLS) whose `announced` is set on each `* N EXISTS`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: bool,
        timeout: float,
        conn_lost_cb: Callable[[Exception | None], None],
    ) -> None:
        self.announced = asyncio.Event()
        self._tls = tls
        super().__init__(host=host, port=port, timeout=timeout, conn_lost_cb=conn_lost_cb)

    def create_client(
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop | None,
        conn_lost_cb: Callable[[Exception | None], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """As the library does, with our protocol (called from `IMAP4.__init__`)."""
        local_loop = loop if loop is not None else asyncio.get_running_loop()
        if self._tls and ssl_context is None:
            ssl_context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        self.protocol = _Protocol(local_loop, conn_lost_cb, self.announced)
        self._client_task = local_loop.create_task(
            local_loop.create_connection(lambda: self.protocol, host, port, ssl=ssl_context)
        )
