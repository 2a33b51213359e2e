"""Files over XMPP: links in (XEP-0066 out-of-band data, as clients send uploaded files) and
XEP-0363 HTTP File Upload out.

A client shares a file by uploading it to its server's upload service and sending the link,
marked as out-of-band data (`<x xmlns="jabber:x:oob"><url>…</url></x>`). Such a link becomes
an attachment of the message; the channel layer downloads it (after the sender is allowed,
under `maxAttachmentBytes`) and hands it to the media package like any channel's file.

The link is the sender's choice, so a download goes only to `http(s)` URLs, and to a
loopback, private or link-local address only when the link's host is the account's own
server (its JID domain, a subdomain of it, or `channels.xmpp.server`): an allowed sender
cannot make the bot fetch from other services of the gateway's network.
"""

from __future__ import annotations

import io
import ipaddress
import mimetypes
import socket
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio

from nodmix.channels.attachments import fetch_capped
from nodmix.channels.types import Attachment

OOB = "jabber:x:oob"
MAX_LINKS = 10
"""Out-of-band links read per message."""
UPLOAD_SECONDS = 300.0


class LinkRefused(ValueError):
    """A link the bot does not fetch (not http(s), or a private address of another host)."""


def oob_urls(stanza: Any) -> tuple[str, ...]:
    """The out-of-band links of a message stanza (XEP-0066), at most `MAX_LINKS`."""
    found = []
    for url in stanza.xml.findall(f"{{{OOB}}}x/{{{OOB}}}url")[:MAX_LINKS]:
        text = (url.text or "").strip()
        if text.lower().startswith(("http://", "https://")):
            found.append(text)
    return tuple(found)


def link_attachment(url: str) -> Attachment:
    """An attachment for a shared link (its kind and type guessed from the file name; the
    content decides in the end)."""
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or "file"
    mime = mimetypes.guess_type(name)[0]
    major = (mime or "").partition("/")[0]
    kind = {"image": "photo", "audio": "voice", "video": "video"}.get(major, "document")
    return Attachment(kind=kind, ref=url, name=name, mime_type=mime)


def _private(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return not ip.is_global


async def check_link(url: str, own_hosts: tuple[str, ...]) -> None:
    """Raises:
    LinkRefused: not `http(s)`, or a host other than the account's own server that resolves
        to a loopback, private or link-local address."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise LinkRefused(f"not an http(s) link: {url[:100]}")
    if any(host == own or host.endswith("." + own) for own in own_hosts if own):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    with anyio.fail_after(10):
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if any(_private(str(info[4][0])) for info in infos):
        raise LinkRefused(f"{host} is a private address and not this account's server")


async def download_link(
    url: str, target: Path, *, max_bytes: int, own_hosts: tuple[str, ...]
) -> Path:
    """Fetch a shared link under the cap (see `check_link`)."""
    await check_link(url, own_hosts)
    return await fetch_capped(url, target, max_bytes)


async def upload(client: Any, name: str, data: bytes, mime: str | None) -> str:
    """Upload through the server's XEP-0363 service; the file's URL.

    Raises:
        slixmpp.plugins.xep_0363.FileUploadError: no service, the file is too big for it, or
            the upload failed.
        TimeoutError: it took longer than `UPLOAD_SECONDS`.
    """
    plugin = client.plugin["xep_0363"]
    with anyio.fail_after(UPLOAD_SECONDS):
        url: str = await plugin.upload_file(
            name,
            size=len(data),
            content_type=mime or mimetypes.guess_type(name)[0],
            input_file=io.BytesIO(data),
            timeout=30,
        )
    return url
