"""Starting and stopping a real local daemon for the channel tests (ngircd, Prosody): a free
loopback port, a self-signed certificate for its TLS, start it and poll until it listens
(failing at once, with its log, if it exits), and stop it politely before killing it."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from nodmix.testing.polling import poll_until

T = TypeVar("T")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def self_signed(workdir: Path, name: str = "server") -> tuple[Path, Path]:
    """A fresh self-signed certificate for `localhost` (and 127.0.0.1), and its key."""
    cert, key = workdir / f"{name}.crt", workdir / f"{name}.key"
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def wait_until(check: Callable[[], T], *, timeout: float = 20.0, what: str = "condition") -> T:
    """Poll `check()` until it returns something truthy (raises after `timeout`)."""
    return poll_until(check, timeout, lambda: f"waiting for {what}")


def start_daemon(
    argv: list[str], port: int, name: str, *, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Run `argv` and wait until 127.0.0.1:`port` accepts a connection; if the process exits
    first, raise with its exit code (and the end of `log`, when it writes one)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening() -> bool:
        if proc.poll() is not None:
            detail = ""
            if log is not None:
                text = log.read_text(encoding="utf-8") if log.exists() else ""
                detail = f": {text[-2000:]}"
            raise RuntimeError(f"{name} exited with {proc.returncode}{detail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(listening, what=f"{name} listening")
    return proc


def stop_daemon(proc: subprocess.Popen[bytes] | None, *, timeout: float = 10.0) -> None:
    """Terminate a running daemon, waiting up to `timeout`, then kill it."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
