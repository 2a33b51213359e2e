"""The attachment cap while a download streams: a server that declares no length, or a
wrong one, is cut off at the cap and nothing stays on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from nodmix.channels.attachments import (
    AttachmentTooLarge,
    fetch_capped,
    max_attachment_bytes,
    megabytes,
    too_large_reply,
)
from nodmix.config.loader import parse_document, validate
from nodmix.testing.http_thread import ThreadedServer

pytestmark = pytest.mark.integration

CHUNK = b"x" * 65536


class Files(ThreadedServer):
    def build_app(self) -> Starlette:
        async def endless(request: Request) -> Response:
            async def body() -> AsyncIterator[bytes]:
                while not await request.is_disconnected():
                    yield CHUNK
                    await anyio.sleep(0.001)

            return StreamingResponse(body(), media_type="application/octet-stream")

        async def small(request: Request) -> Response:
            return Response(b"y" * 1000)

        return Starlette(routes=[Route("/endless", endless), Route("/small", small)])


def test_a_stream_without_a_length_is_cut_at_the_cap_and_removed(tmp_path: Path) -> None:
    target = tmp_path / "file"
    with Files() as server, pytest.raises(AttachmentTooLarge):
        anyio.run(lambda: fetch_capped(f"http://127.0.0.1:{server.port}/endless", target, 300_000))
    assert not target.exists()


def test_a_file_under_the_cap_is_written(tmp_path: Path) -> None:
    with Files() as server:
        saved = anyio.run(
            lambda: fetch_capped(f"http://127.0.0.1:{server.port}/small", tmp_path / "f", 2000)
        )
    assert saved.read_bytes() == b"y" * 1000


def test_the_cap_comes_from_the_channel_then_the_defaults_then_20_mb() -> None:
    def cap(text: str, channel: str) -> int:
        config = validate(parse_document(text, file="t.json"), file="t.json")
        return max_attachment_bytes(config, channel)

    assert cap("{}", "telegram") == 20 * 1024 * 1024
    assert cap("{channels: {defaults: {maxAttachmentBytes: 1000}}}", "discord") == 1000
    both = "{channels: {defaults: {maxAttachmentBytes: 1000}, telegram: {maxAttachmentBytes: 5}}}"
    assert cap(both, "telegram") == 5


def test_the_reply_names_the_size_and_the_setting() -> None:
    assert megabytes(20 * 1024 * 1024) == "20 MB" and megabytes(1536 * 1024) == "1.5 MB"
    assert too_large_reply("voice", 1024 * 1024, 3 * 1024 * 1024) == (
        "That voice note is 3 MB, larger than the 1 MB this assistant accepts, so it was not "
        "saved (channels.defaults.maxAttachmentBytes)."
    )
