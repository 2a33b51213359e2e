"""Real media for tests, made on the spot: photos with Pillow, voice notes with ffmpeg."""

from __future__ import annotations

import io
import os
import shutil
import struct
import zlib

import pytest
from PIL import Image

from nodmix.testing.audio_wire import encode, tone_wav


def photo(width: int = 2400, height: int = 1800, fmt: str = "JPEG", **save: object) -> bytes:
    """A gradient photo (`fmt`: any format Pillow writes)."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    image.putpixel((0, 0), (255, 0, 0))
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def noise(width: int, height: int, fmt: str = "PNG") -> bytes:
    """Random pixels: an image that does not compress (a large file for its size)."""
    image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims `width` x `height` pixels (a decompression bomb's
    opening: the data that follows is a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def needs_ffmpeg() -> None:
    """Skip unless Debian's ffmpeg is installed (`make media`)."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs ffmpeg (make media)")


def voice_note(seconds: float = 1.0) -> bytes:
    """A real OGG/Opus voice note (a tone), as Telegram sends them."""
    return encode(tone_wav(seconds), "opus")[0]


def ogg_opus_channels(data: bytes) -> int:
    """The channel count of an Ogg stream's Opus header (RFC 7845).

    Raises:
        AssertionError: `data` is not an Ogg stream starting with an Opus header.
    """
    assert data[:4] == b"OggS", "not an Ogg stream"
    assert data[5] & 0x02, "the first page is not marked beginning-of-stream"
    segments = data[26]
    start = 27 + segments
    assert data[start : start + 8] == b"OpusHead", "the first packet is not an Opus header"
    return data[start + 9]
