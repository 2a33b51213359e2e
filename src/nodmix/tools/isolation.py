"""The seam between tools and the sandbox: which calls are isolated, and how a command is wrapped.

Tools only know this protocol; `nodmix.security.sandbox` implements it (bubblewrap). A tool built
without an isolation (tests, the memory flush) behaves as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import httpx2
import msgspec

from nodmix.tools.base import ToolContext


class Launch(msgspec.Struct, frozen=True, kw_only=True):
    """A process about to be spawned: its argv, full environment and working directory."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


class Isolation(Protocol):
    """Decides which tool calls are sandboxed and wraps their commands."""

    def applies(self, ctx: ToolContext) -> bool:
        """Whether the call's session is sandboxed."""
        ...

    async def wrap(self, launch: Launch, ctx: ToolContext) -> Launch:
        """The sandboxed form of `launch`.

        Raises:
            ToolError: The sandbox cannot start here (one line saying how to fix it); the
                command must then not run at all.
        """
        ...

    def web_transport(self) -> httpx2.AsyncBaseTransport:
        """The HTTP transport `web_fetch` uses in a sandboxed session.

        It refuses loopback, link-local and private addresses: every address the host
        resolves to is checked, and the connection goes to the checked address.
        """
        ...
