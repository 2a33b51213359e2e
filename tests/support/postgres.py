"""A real PostgreSQL server for the state backend's tests and benchmarks: Debian's binaries
(`scripts/ensure-postgres.sh`), `initdb` into a fresh temp dir and `pg_ctl` on a free loopback
port. `initdb` refuses to run as root, so as root the server runs as Debian's `postgres`
user; as anyone else, as that user. Each test gets its own database (`fresh_database`)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


def pg_bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise RuntimeError("PostgreSQL is not installed: run scripts/ensure-postgres.sh")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temp dir; `stop()`/`start()` keep its port and data."""

    def __init__(self, *, fast: bool = True) -> None:
        """`fast` turns fsync off (tests); benchmarks keep PostgreSQL's defaults."""
        self.bin = pg_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="nodmix-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.user = "nodmix"
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.fast = fast
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        options = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.root}'",
            "max_connections = 300",
            "shared_buffers = 32MB",
        ]
        if fast:
            options += ["fsync = off", "full_page_writes = off", "synchronous_commit = off"]
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n".join(options) + "\n")

    def _run(self, argv: list[str], *, timeout: float = 120) -> str:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
            **self._as,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}{done.stderr}")
        return done.stdout

    @property
    def url(self) -> str:
        """The URL of the maintenance database `postgres`."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        self._run(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w"]
            + ["-t", "60", "start"]
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`immediate` is a crash: no checkpoint)."""
        if (self.data / "postmaster.pid").exists():
            self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def running(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def fresh_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def wait_for(check: Any, *, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `check()` until truthy under a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
