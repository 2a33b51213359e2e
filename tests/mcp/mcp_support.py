"""Helpers for the MCP tests: real servers as subprocesses, and process bookkeeping.

Servers used: `mcp-server-time` (PyPI, stdio), `@modelcontextprotocol/server-everything` (npm,
stdio, streamable HTTP and SSE) and `servers/lifecycle_server.py` (our own small SDK server for
crash, timeout and cancellation cases).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from nodmix.config.schema import MCPServerConfig
from nodmix.tools.base import ToolContext

REPO_ROOT = Path(__file__).resolve().parents[2]
EVERYTHING_BIN = REPO_ROOT / "node_modules" / ".bin" / "mcp-server-everything"
LIFECYCLE_SERVER = Path(__file__).resolve().parent / "servers" / "lifecycle_server.py"
DEADLINE_S = 10.0


def everything_bin() -> str:
    """The server-everything executable, or a test failure that says how to install it."""
    if not EVERYTHING_BIN.exists():
        pytest.fail(
            f"{EVERYTHING_BIN} is missing: run `npm ci` (or `make node`) in {REPO_ROOT} first"
        )
    return str(EVERYTHING_BIN)


def _stdio(command: str, args: list[str], overrides: dict[str, Any]) -> MCPServerConfig:
    return msgspec.structs.replace(MCPServerConfig(command=command, args=args), **overrides)


def time_server(**overrides: Any) -> MCPServerConfig:
    """Config of mcp-server-time over stdio (fields of `MCPServerConfig` as overrides)."""
    return _stdio(sys.executable, ["-m", "mcp_server_time"], overrides)


def everything_stdio(**overrides: Any) -> MCPServerConfig:
    """Config of server-everything over stdio."""
    return _stdio(everything_bin(), ["stdio"], overrides)


def lifecycle_server(**overrides: Any) -> MCPServerConfig:
    """Config of our lifecycle test server over stdio."""
    return _stdio(sys.executable, [str(LIFECYCLE_SERVER)], overrides)


def tool_context(tmp_path: Path) -> ToolContext:
    """A context for calling tools outside a run."""
    return ToolContext(
        agent_id="main",
        session_key="agent:main:test",
        session_id="s1",
        run_id="r1",
        call_id="c1",
        workspace=tmp_path,
    )


def child_processes() -> dict[int, str]:
    """Direct children of this process: pid → state letter (`Z` is a zombie)."""
    me = os.getpid()
    out: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me:
            out[int(entry)] = fields[0]
    return out


def process_state(pid: int) -> str | None:
    """The state letter of a process, or None once it is gone (reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


async def wait_until(check: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Poll `check` until it holds, failing the test after `timeout` seconds."""
    with anyio.move_on_after(timeout):
        while not check():
            await anyio.sleep(0.01)
        return
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HTTPServer:
    """An HTTP MCP server subprocess on a local port (server-everything unless `command`)."""

    def __init__(
        self, mode: str, port: int | None = None, command: list[str] | None = None
    ) -> None:
        self.mode = mode
        self.port = port or free_port()
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> HTTPServer:
        env = {**os.environ, "PORT": str(self.port)}
        self.process = subprocess.Popen(
            self.command or [everything_bin(), self.mode],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"{self.mode} server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.01)  # sync fixture: polling the port with a deadline
        pytest.fail(f"{self.mode} server did not listen on {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE_S)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"
