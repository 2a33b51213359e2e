"""Which hosts a page may reach: public addresses, plus what `tools.browser` allows.

The browser's connections are resolved here, not in Chromium (see `proxy.py`): the host is
resolved once, every address is checked, and the connection goes to a checked address, so a
DNS name that answers a public address first and a private one next (rebinding) gets nowhere.
"""

from __future__ import annotations

import ipaddress
import socket
from collections import deque

import anyio
import msgspec

from nodmix.security.network import is_public

RESOLVE_TIMEOUT_SECONDS = 10.0
REFUSED_KEPT = 50


class BlockedAddress(Exception):
    """The host is, or resolves to, an address the page may not reach."""


class NetworkPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """`allowPrivateNetwork` and `allowHosts`."""

    allow_private: bool = False
    allow_hosts: tuple[str, ...] = ()

    def host_allowed(self, host: str) -> bool:
        """Whether `host` is listed (exactly, or under a `*.domain` entry)."""
        name = host.strip("[]").rstrip(".").lower()
        for entry in self.allow_hosts:
            pattern = entry.strip().rstrip(".").lower()
            if pattern.startswith("*."):
                if name.endswith(pattern[1:]) or name == pattern[2:]:
                    return True
            elif name == pattern:
                return True
        return False

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for `host`, all checked.

        Raises:
            BlockedAddress: An address is private and the host is not allowed.
            OSError: The name does not resolve.
        """
        bare = host.strip("[]")
        try:
            literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(
                bare
            )
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [literal]
        else:
            with anyio.fail_after(RESOLVE_TIMEOUT_SECONDS):
                infos = await anyio.getaddrinfo(bare, port, type=socket.SOCK_STREAM)
            addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise OSError(f"{host} has no address")
        if not (self.allow_private or self.host_allowed(bare)):
            for address in addresses:
                if not is_public(address):
                    via = "" if literal is not None else f" (it resolves to {address})"
                    raise BlockedAddress(f"{host}{via}")
        return list(dict.fromkeys(str(a) for a in addresses))


class RefusedLog:
    """The last hosts the guard refused, for the tool's result (`blocked: ...`)."""

    def __init__(self) -> None:
        self._entries: deque[str] = deque(maxlen=REFUSED_KEPT)
        self.count = 0

    def add(self, what: str) -> None:
        self._entries.append(what)
        self.count += 1

    def since(self, mark: int) -> list[str]:
        """What was refused after `count` was `mark` (at most the last 50)."""
        new = self.count - mark
        return list(self._entries)[-new:] if new > 0 else []
