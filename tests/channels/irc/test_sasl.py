"""SASL PLAIN login (ngircd has no SASL): pydle and pure-sasl against a small scripted server
that speaks IRCv3 capability negotiation on a real socket and records what the client sent."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from nodmix.channels.irc.adapter import IrcAdapter, IrcSettings


class SaslServer:
    """Accepts one SASL PLAIN login (`accept` decides), then welcomes the client."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.lines: list[str] = []
        self.credentials: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nick = "*"

        def say(line: str) -> None:
            writer.write(f":sasl.test {line}\r\n".encode())

        while line := (await reader.readline()).decode().strip():
            self.lines.append(line)
            command, _, rest = line.partition(" ")
            if command == "NICK":
                nick = rest
            elif line.startswith("CAP LS"):
                say("CAP * LS :sasl")
            elif line.startswith("CAP REQ"):
                say(f"CAP * ACK :{rest.split(':', 1)[-1].strip()}")
            elif line == "AUTHENTICATE PLAIN":
                writer.write(b"AUTHENTICATE +\r\n")
            elif line == "AUTHENTICATE *":
                say(f"906 {nick} :SASL authentication aborted")
            elif command == "AUTHENTICATE":
                blob = base64.b64decode(rest)
                self.credentials.append(blob)
                if blob.split(b"\0")[-1] == self.password.encode():
                    say(f"903 {nick} :SASL authentication successful")
                else:
                    say(f"904 {nick} :SASL authentication failed")
            elif line == "CAP END":
                say(f"001 {nick} :Welcome")
                say(f"375 {nick} :- sasl.test message of the day")
                say(f"376 {nick} :End of MOTD")
            elif command == "QUIT":
                break
            await writer.drain()
        writer.close()


def test_sasl_plain_sends_the_account_and_password_before_registration(tmp_path: Path) -> None:
    server = SaslServer("hunter2")

    async def main() -> str:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        settings = IrcSettings(
            host="127.0.0.1",
            port=port,
            tls=False,
            nick="ferrybot",
            sasl_username="ferry",
            sasl_password="hunter2",
        )
        try:
            return await asyncio.wait_for(IrcAdapter(settings, tmp_path).check(), 20)
        finally:
            listener.close()

    account = asyncio.run(main())
    assert account.startswith("ferrybot on 127.0.0.1:")
    assert server.credentials == [b"ferry\0ferry\0hunter2"]
    assert server.lines.index("AUTHENTICATE PLAIN") < server.lines.index("CAP END")


def test_a_refused_sasl_login_does_not_connect_unauthenticated(tmp_path: Path) -> None:
    server = SaslServer("hunter2")

    async def main() -> str:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        settings = IrcSettings(
            host="127.0.0.1",
            port=port,
            tls=False,
            nick="ferrybot",
            sasl_username="ferry",
            sasl_password="wrong",
        )
        try:
            return await asyncio.wait_for(IrcAdapter(settings, tmp_path).check(), 20)
        finally:
            listener.close()

    with pytest.raises(ConnectionError, match="SASL login refused"):
        asyncio.run(main())
    assert server.credentials == [b"ferry\0ferry\0wrong"]
