"""The email adapter against a scripted IMAP server on a loopback socket: a session the server
ends is left at once and opened again, however it ends (`* BYE` with the socket still open,
or the socket closed under a pending command)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from nodmix.channels.email.adapter import EmailAdapter
from nodmix.channels.email.settings import EmailSettings
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage

pytestmark = pytest.mark.anyio


class ScriptedImap:
    """Enough IMAP for the adapter: greeting, LOGIN, SELECT, UID SEARCH, IDLE/DONE, LOGOUT. Only the
    first session misbehaves, as `first` says: "bye" pushes `* BYE` in IDLE and keeps the
    socket open; "drop" closes the socket instead of answering UID SEARCH."""

    def __init__(self, first: str) -> None:
        self.first = first
        self.logins = 0
        self.port = 0
        self._open: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> ScriptedImap:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for writer in self._open:
            writer.close()
        await self._server.wait_closed()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.append(writer)
        misbehave = ""

        def say(*lines: str) -> None:
            writer.write("".join(f"{line}\r\n" for line in lines).encode())

        say("* OK [CAPABILITY IMAP4rev1 IDLE] ready")
        idling = ""
        while line := (await reader.readline()).decode().strip():
            tag, _, command = line.partition(" ")
            verb = command.split(" ")[0].upper()
            if line == "DONE":
                say(f"{idling} OK idle done")
            elif verb == "CAPABILITY":
                say("* CAPABILITY IMAP4rev1 IDLE", f"{tag} OK listed")
            elif verb == "LOGIN":
                self.logins += 1
                misbehave = self.first if self.logins == 1 else ""
                say(f"{tag} OK logged in")
            elif verb == "SELECT":
                say("* 0 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 1] ok")
                say(f"{tag} OK [READ-WRITE] selected")
            elif verb == "UID" and misbehave == "drop":
                writer.close()
                return
            elif verb == "UID":
                say("* SEARCH", f"{tag} OK searched")
            elif verb == "IDLE":
                idling = tag
                say("+ idling")
                if misbehave == "bye":
                    say("* BYE going away")  # and the socket stays open
            elif verb == "LOGOUT":
                say("* BYE logging out", f"{tag} OK bye")
            await writer.drain()


def _settings(port: int) -> EmailSettings:
    return EmailSettings(
        address="agent@example.org",
        imap_host="127.0.0.1",
        imap_port=port,
        imap_tls=False,
        imap_user="agent@example.org",
        imap_password="pw",
        mailbox="INBOX",
        smtp_host="127.0.0.1",
        smtp_port=25,
        smtp_security="none",
        smtp_user=None,
        smtp_password=None,
    )


async def _until(check: Callable[[], object], what: str) -> None:
    """Poll `check` (the deadline is far below the 30 s command and 600 s IDLE timeouts)."""
    with anyio.move_on_after(10):
        while not check():
            await anyio.sleep(0.02)
    assert check(), f"{what}: not within 10 s"


async def _sink(message: InboundMessage) -> None:
    raise AssertionError(f"no mail was delivered, got {message}")


@pytest.mark.parametrize(
    ("first", "error"),
    [("bye", "imap: BYE going away"), ("drop", "imap: connection lost")],
    ids=["bye-with-the-socket-open", "socket-closed-under-a-command"],
)
async def test_a_session_the_server_ends_is_left_at_once_and_opened_again(
    tmp_path: Path, first: str, error: str
) -> None:
    status = ChannelStatus(channel="email")
    async with ScriptedImap(first) as server, anyio.create_task_group() as tasks:
        adapter = EmailAdapter(_settings(server.port), tmp_path)
        tasks.start_soon(adapter.run, _sink, status)
        await _until(lambda: status.last_error is not None, "the end of the first session")
        assert status.last_error == error
        await _until(lambda: server.logins == 2 and status.connected, "the second session")
        tasks.cancel_scope.cancel()
