"""Links a message points at, fetched for a sender: only public addresses, redirects included.

A link in a message (an XMPP client's shared file, a Teams file's download URL) is the
sender's or the platform's choice, so it is fetched only over `http(s)`, and only when its
host resolves to public addresses, unless its origin (scheme, host, port) is one the channel
knows as the platform's own (an XMPP server's upload service, the Bot Connector a chat came
from), which may live on a private address. Every redirect is checked the same way before it
is followed, so a public link cannot send the bot on to the gateway's neighbours (its
loopback services, the cloud metadata address, the LAN). A link that is not at a known origin
is fetched through `nodmix.security.network`'s guarded transport, which connects only to the
addresses it checked, so a name that resolves differently the second time (DNS rebinding)
gets nowhere either.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from nodmix.channels.attachments import fetch_capped
from nodmix.security.network import PrivateAddressError, guarded_transport, is_public

Origin = tuple[str, str, int]
"""`(scheme, host, port)` of a URL."""
RESOLVE_SECONDS = 10.0


class LinkRefused(ValueError):
    """A link the bot does not fetch (not http(s), or a private address it does not know)."""


def origin_of(url: str) -> Origin | None:
    """The `(scheme, host, port)` of an `http(s)` URL (None for anything else)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.scheme, host, port


def _private(address: str) -> bool:
    return not is_public(ipaddress.ip_address(address.split("%", 1)[0]))


async def check_link(url: str, known: frozenset[Origin] = frozenset()) -> None:
    """Raises:
    LinkRefused: not `http(s)`, or a loopback, private or link-local address whose origin is
        not among `known`."""
    origin = origin_of(url)
    if origin is None:
        raise LinkRefused(f"not an http(s) link: {url[:100]}")
    if origin in known:
        return
    _, host, port = origin
    with anyio.fail_after(RESOLVE_SECONDS):
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if any(_private(str(info[4][0])) for info in infos):
        raise LinkRefused(f"{host} is a private address the channel does not know")


async def fetch_link(
    url: str,
    target: Path,
    *,
    max_bytes: int,
    known: frozenset[Origin] = frozenset(),
    headers: dict[str, str] | None = None,
) -> Path:
    """Fetch `url` under the cap, checking it and every redirect (see `check_link`).

    Raises:
        LinkRefused: the link or a redirect is not one to fetch.
    """
    await check_link(url, known)
    transport = None if origin_of(url) in known else guarded_transport()
    try:
        return await fetch_capped(
            url,
            target,
            max_bytes,
            headers=headers,
            check=lambda hop: check_link(hop, known),
            transport=transport,
        )
    except PrivateAddressError as exc:  # the name resolved elsewhere when connecting
        found = re.search(r"reach (\S+) \(it resolves to ([^)]+)\)", str(exc))
        what = f"{found[1]} resolves to {found[2]}" if found else str(exc)
        raise LinkRefused(f"{what}, a private address the channel does not know") from None
