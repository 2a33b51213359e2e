"""Files over XMPP: links in (XEP-0066 out-of-band data, as clients send uploaded files) and
XEP-0363 HTTP File Upload out.

A client shares a file by uploading it to its server's upload service and sending the link,
marked as out-of-band data (`<x xmlns="jabber:x:oob"><url>…</url></x>`). Such a link becomes
an attachment of the message; the channel layer downloads it (after the sender is allowed,
under `maxAttachmentBytes`) and hands it to the media package like any channel's file.

The link is the sender's choice, so a download goes only to `http(s)` URLs, and to a
loopback, private or link-local address only when it is the account's own server's upload
service: the same scheme, host and port as the slots that service hands out (the bot asks it
for one slot, never used, the first time such a link arrives). Any other port of the server's
host is refused too: the server often runs beside the gateway, on 127.0.0.1, with other
services. Every redirect is checked the same way before it is followed, so a harmless-looking
link cannot send the bot on to them either.
"""

from __future__ import annotations

import io
import logging
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio

from nodmix.channels.links import Origin, fetch_link, origin_of
from nodmix.channels.types import Attachment

log = logging.getLogger("nodmix.channels.xmpp")

OOB = "jabber:x:oob"
MAX_LINKS = 10
"""Out-of-band links read per message."""
UPLOAD_SECONDS = 300.0
SLOT_SECONDS = 10.0
"""Finding the upload service and asking it for a slot, at most."""


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


async def download_link(url: str, target: Path, *, max_bytes: int, own: frozenset[Origin]) -> Path:
    """Fetch a shared link under the cap, checking it and every redirect (`own`: the origins
    of the own server's upload service, which may be a private address)."""
    return await fetch_link(url, target, max_bytes=max_bytes, known=own)


async def upload_origins(client: Any) -> frozenset[Origin]:
    """Where the own server's upload service serves files: the origin of a slot it hands out
    (asked for one byte, never uploaded); none when it has no such service or does not
    answer in time."""
    plugin = client.plugin["xep_0363"]
    try:
        with anyio.fail_after(SLOT_SECONDS):
            info = await plugin.find_upload_service(timeout=SLOT_SECONDS)
            if info is None:
                return frozenset()
            slot = await plugin.request_slot(
                info["from"], "nodmix-probe.txt", 1, timeout=SLOT_SECONDS
            )
    except Exception as exc:  # an error answer, a timeout: no upload service to trust
        log.info("xmpp: no upload service found (%s)", exc)
        return frozenset()
    found = {origin_of(str(slot["http_upload_slot"][part]["url"])) for part in ("get", "put")}
    return frozenset(o for o in found if o is not None)


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
