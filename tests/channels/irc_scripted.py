"""A scripted IRC server for what ngircd cannot show: services accounts (IRCv3 `account-tag`,
`account-notify`, `extended-join`). It speaks capability negotiation and registration on a
real socket in a thread of its own, answers `USERHOST` from a table, records what the client
sends and lets a test put lines on the wire as the network would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

from tests.channels.irc_daemon import wait_until

T = TypeVar("T")
NAME = "irc.scripted.test"


class ScriptedIrc:
    """One server, one client at a time; `caps` are the capabilities it offers."""

    def __init__(self, caps: tuple[str, ...]) -> None:
        self.caps = caps
        self.lines: list[str] = []
        self.hosts: dict[str, str] = {}
        """nick (lower case) -> `user@host`, for `USERHOST` and `WHOIS` (no account: WHOIS
        never vouches for one here, only the IRCv3 paths do)."""
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._writer: asyncio.StreamWriter | None = None
        self._nick = "*"
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ScriptedIrc:
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        ).result(10)
        self._server = server
        self.port = server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            self._server.close()
            if self._writer is not None:
                self._writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def send(self, line: str) -> None:
        """Put one line on the wire to the client (as the network relays it)."""

        def write() -> None:
            assert self._writer is not None, "no client connected"
            self._writer.write(line.encode() + b"\r\n")

        self._loop.call_soon_threadsafe(write)

    def privmsgs(self, target: str | None = None) -> list[str]:
        """Texts the client sent with PRIVMSG (to `target`)."""
        with self._lock:
            lines = list(self.lines)
        out = []
        for line in lines:
            if line.startswith("PRIVMSG "):
                to, _, text = line[len("PRIVMSG ") :].partition(" :")
                if target is None or to.lower() == target.lower():
                    out.append(text)
        return out

    def registered(self) -> bool:
        with self._lock:
            return any(line.startswith("CAP END") for line in self.lines) and any(
                line.startswith("JOIN") for line in self.lines
            )

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0, what: str = "") -> T:
        return wait_until(check, timeout=timeout, what=what or "scripted irc condition")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

        def say(line: str) -> None:
            writer.write(f":{NAME} {line}\r\n".encode())

        with contextlib.suppress(ConnectionError):
            while raw := await reader.readline():
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._lock:
                    self.lines.append(line)
                command, _, rest = line.partition(" ")
                if command == "NICK":
                    self._nick = rest.lstrip(":")
                elif line.startswith("CAP LS"):
                    say(f"CAP * LS :{' '.join(self.caps)}")
                elif command == "CAP" and rest.startswith("REQ"):
                    say(f"CAP * ACK :{rest.split(':', 1)[-1].strip()}")
                elif line == "CAP END":
                    say(f"001 {self._nick} :Welcome")
                    say(f"375 {self._nick} :- {NAME} message of the day")
                    say(f"376 {self._nick} :End of MOTD")
                elif command == "JOIN":
                    room = rest.split()[0].lstrip(":")
                    extended = " * :Nodmix" if "extended-join" in self.caps else ""
                    writer.write(f":{self._nick}!bot@bot.host JOIN {room}{extended}\r\n".encode())
                    say(f"366 {self._nick} {room} :End of NAMES")
                elif command == "PING":
                    say(f"PONG {NAME} {rest}")
                elif command == "USERHOST":
                    nick = rest.split()[0]
                    known = self.hosts.get(nick.lower())
                    say(f"302 {self._nick} :{f'{nick}=+{known}' if known else ''}")
                elif command == "WHOIS":
                    nick = rest.split()[-1]
                    known = self.hosts.get(nick.lower())
                    if known:
                        user, _, host = known.partition("@")
                        say(f"311 {self._nick} {nick} {user} {host} * :Someone")
                    else:
                        say(f"401 {self._nick} {nick} :No such nick")
                    say(f"318 {self._nick} {nick} :End of WHOIS")
                elif command == "QUIT":
                    break
                await writer.drain()
        writer.close()
