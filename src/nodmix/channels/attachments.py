"""The attachment size cap (`channels.defaults.maxAttachmentBytes`, per channel too).

A file larger than the cap is refused with a reply that says so and is never written: the
size the platform declares is checked before anything is downloaded, and a download is
counted as it streams and abandoned (its partial file removed) the moment it passes the cap,
whatever the platform declared.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from pathlib import Path

import anyio
import httpx2

from nodmix.config.schema import NodmixConfig

DEFAULT_MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
DOWNLOAD_SECONDS = 300.0
"""A download that has not finished after this long is abandoned."""
IDLE_SECONDS = 30.0


class AttachmentTooLarge(Exception):
    """An attachment is larger than the channel's cap (`size` None: found while streaming)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        self.limit = limit
        self.size = size
        super().__init__(f"larger than {megabytes(limit)} (maxAttachmentBytes)")


def megabytes(size: int) -> str:
    """`2 GB`, `20 MB`, `1.5 MB`, `900 KB`."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{max(1, size // 1024)} KB"


def max_attachment_bytes(config: NodmixConfig, channel: str) -> int:
    """The channel's `maxAttachmentBytes`, else `channels.defaults`', else 20 MB."""
    section = getattr(config.channels, channel, None)
    for value in (
        getattr(section, "max_attachment_bytes", None),
        config.channels.defaults.max_attachment_bytes,
    ):
        if value is not None:
            return int(value)
    return DEFAULT_MAX_ATTACHMENT_BYTES


def check_declared(size: int | None, limit: int) -> None:
    """Refuse a declared size over the cap before any download.

    Raises:
        AttachmentTooLarge: `size` is known and larger than `limit`.
    """
    if size is not None and size > limit:
        raise AttachmentTooLarge(limit, size)


async def write_capped(chunks: AsyncIterable[bytes], target: Path, limit: int) -> Path:
    """Write a streamed download to `target`, at most `limit` bytes.

    Raises:
        AttachmentTooLarge: the stream passed the cap (the partial file is removed).
    """
    written = 0
    try:
        async with await anyio.open_file(target, "wb") as out:
            async for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise AttachmentTooLarge(limit)
                await out.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise
    return target


async def fetch_capped(
    url: str,
    target: Path,
    limit: int,
    *,
    headers: Mapping[str, str] | None = None,
    check: Callable[[str], Awaitable[None]] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> Path:
    """GET `url` into `target`: the declared length checked first, the stream counted, the
    whole download bounded in time. `check` is awaited with the URL of every request made,
    redirects included, before it is sent (it raises to refuse one); `transport` replaces
    httpx's own (one that connects only to checked addresses, say).

    Raises:
        AttachmentTooLarge: larger than `limit` (nothing is left on disk).
        httpx2.HTTPError: the request failed.
        TimeoutError: it took longer than `DOWNLOAD_SECONDS`.
    """
    timeout = httpx2.Timeout(IDLE_SECONDS, connect=10.0)

    async def checked(request: httpx2.Request) -> None:
        if check is not None:
            await check(str(request.url))

    hooks = {"request": [checked]}
    with anyio.fail_after(DOWNLOAD_SECONDS):
        async with (
            httpx2.AsyncClient(
                timeout=timeout, follow_redirects=True, event_hooks=hooks, transport=transport
            ) as client,
            client.stream("GET", url, headers=dict(headers or {})) as response,
        ):
            response.raise_for_status()
            length = response.headers.get("content-length", "")
            check_declared(int(length) if length.isdigit() else None, limit)
            return await write_capped(response.aiter_bytes(), target, limit)


def too_large_reply(kind: str, limit: int, size: int | None) -> str:
    """The one line a sender gets for an attachment over the cap."""
    what = {"photo": "photo", "voice": "voice note", "audio": "audio file"}.get(kind, "file")
    how_big = f" is {megabytes(size)}," if size is not None else " is"
    return (
        f"That {what}{how_big} larger than the {megabytes(limit)} this assistant accepts, so "
        "it was not saved (channels.defaults.maxAttachmentBytes)."
    )
