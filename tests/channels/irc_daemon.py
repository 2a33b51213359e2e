"""A real IRC daemon for the IRC channel tests (Debian's ngircd on 127.0.0.1, started with a
generated config in a temp dir; as root it drops to `nobody`) and a plain-socket IRC user that
talks to it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tests.channels.daemon import free_port, self_signed, start_daemon, stop_daemon, wait_until

T = TypeVar("T")
NGIRCD = "/usr/sbin/ngircd"


class Ngircd:
    """An ngircd process on 127.0.0.1:`port`; `stop()` and `start()` again keep the port."""

    def __init__(self, workdir: Path, *, tls: bool = False) -> None:
        assert shutil.which(NGIRCD) or os.path.exists(NGIRCD), (
            "ngircd is missing: run scripts/ensure-mail-irc-daemons.sh"
        )
        self.workdir = workdir
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        self.cert = workdir / "cert.crt"
        self.config = workdir / "ngircd.conf"
        ssl_section = ""
        if self.tls_port is not None:
            self.cert, key = self_signed(workdir, "cert")
            ssl_section = (
                f"[SSL]\nCertFile = {self.cert}\nKeyFile = {key}\nPorts = {self.tls_port}\n"
            )
        self.config.write_text(
            "[Global]\nName = irc.nodmix.test\nInfo = Nodmix test server\n"
            "AdminInfo1 = tests\nAdminInfo2 = tests\nAdminEMail = tests@nodmix.test\n"
            f"Listen = 127.0.0.1\nPorts = {self.port}\nMotdPhrase = test\n"
            "[Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\n"
            "[Options]\nPAM = no\nIdent = no\nDNS = no\n" + ssl_section,
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [NGIRCD, "--nodaemon", "--config", str(self.config)]
        self.proc = start_daemon(argv, self.port, "ngircd")

    def stop(self) -> None:
        stop_daemon(self.proc, timeout=10)
        self.proc = None


class IrcUser:
    """A person on IRC: registers a nick, joins, sends and records what reaches it."""

    def __init__(self, port: int, nick: str, user: str = "person") -> None:
        self.nick = nick
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.settimeout(None)  # the reader waits for as long as the server is quiet
        self.lines: list[str] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.send(f"NICK {nick}")
        self.send(f"USER {user} 0 * :Test Person")
        self.wait_for(lambda: any(" 001 " in line for line in self.lines), what="registered")

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while b"\r\n" in buffer:
                raw, buffer = buffer.split(b"\r\n", 1)
                line = raw.decode("utf-8", "replace")
                if line.startswith("PING"):
                    self.send("PONG" + line[4:])
                with self._lock:
                    self.raw.append(raw)
                    self.lines.append(line)

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def join(self, channel: str) -> None:
        self.send(f"JOIN {channel}")
        self.wait_for(
            lambda: any(
                f"JOIN {channel}" in line or f"JOIN :{channel}" in line for line in self.lines
            ),
            what=f"joined {channel}",
        )

    def say(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")

    def received(self, target: str | None = None, sender: str | None = None) -> list[str]:
        """Texts of the PRIVMSGs that reached this user (to `target`, from `sender`)."""
        out = []
        with self._lock:
            lines = list(self.lines)
        for line in lines:
            if not line.startswith(":") or " PRIVMSG " not in line:
                continue
            prefix, rest = line[1:].split(" PRIVMSG ", 1)
            to, _, text = rest.partition(" :")
            if target is not None and to.lower() != target.lower():
                continue
            if sender is not None and prefix.split("!", 1)[0].lower() != sender.lower():
                continue
            out.append(text)
        return out

    def raw_privmsgs(self) -> list[bytes]:
        with self._lock:
            return [raw for raw in self.raw if b" PRIVMSG " in raw]

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0, what: str = "") -> T:
        return wait_until(check, timeout=timeout, what=what or "irc condition")

    def close(self) -> None:
        try:
            self.send("QUIT :bye")
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
