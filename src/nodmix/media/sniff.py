"""What a saved file is, from its first bytes: an image, audio, or something else.

Names and declared types come from the sender and are only a hint; the content decides. An
"audio file" that is really a program is not sent anywhere as audio.
"""

from __future__ import annotations

from typing import Literal

MediaKind = Literal["image", "audio", "other"]

HEAD_BYTES = 64
"""How much of a file `sniff` looks at."""

_IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)
_AUDIO_MAGIC = (
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
    (b"#!AMR", "audio/amr"),
    (b"\x1aE\xdf\xa3", "audio/webm"),  # Matroska/WebM (browser recordings)
)
_MP4_AUDIO_BRANDS = (b"M4A ", b"M4B ", b"mp42", b"isom", b"iso2", b"3gp4", b"3gp5", b"dash")


def audio_type(head: bytes) -> str | None:
    """The MIME type of an audio container, from a file's first bytes; None when the bytes
    are no audio container Nodmix knows."""
    for magic, mime in _AUDIO_MAGIC:
        if head.startswith(magic):
            return mime
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06:
        return "audio/mpeg"  # an MPEG audio frame without an ID3 tag (layer bits set)
    if head[4:8] == b"ftyp" and head[8:12] in _MP4_AUDIO_BRANDS:
        return "audio/mp4"
    return None


def image_type(head: bytes) -> str | None:
    """The MIME type of an image format models take (or its close kin), from a file's first
    bytes; None for anything else."""
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _IMAGE_MAGIC if head.startswith(magic)), None)


def is_image(head: bytes) -> bool:
    """Whether the bytes start like an image format models take (WebP included)."""
    return image_type(head) is not None


def sniff(head: bytes) -> MediaKind:
    """`image`, `audio` or `other`, by content."""
    if is_image(head):
        return "image"
    if audio_type(head) is not None:
        return "audio"
    return "other"
