"""Audio conversion with ffmpeg (Debian's `ffmpeg`, installed by `make media`): a spoken
reply becomes OGG/Opus, what Telegram plays as a voice message.

ffmpeg runs as a subprocess reading stdin and writing stdout, under a deadline (killed when it
passes) and an output cap; nothing here decodes audio itself. Audio that already is OGG/Opus
(the default `messages.tts.format`) is passed through without ffmpeg.
"""

from __future__ import annotations

import shutil

import anyio

from nodmix.media.errors import MediaError

FFMPEG_HINT = (
    "ffmpeg is missing, so voice replies cannot be converted: install it "
    "(apt-get install ffmpeg, or make media in the Nodmix checkout)"
)
CONVERT_SECONDS = 60.0
MAX_OUTPUT_BYTES = 20 << 20


def is_ogg_opus(data: bytes) -> bool:
    """Whether `data` is an Ogg stream whose first packet is an Opus header."""
    return data.startswith(b"OggS") and b"OpusHead" in data[:80]


def ffmpeg_path() -> str | None:
    """The ffmpeg executable on PATH, if any."""
    return shutil.which("ffmpeg")


async def to_ogg_opus(data: bytes, *, timeout: float = CONVERT_SECONDS) -> bytes:
    """`data` (any audio ffmpeg reads from a pipe) as mono OGG/Opus for voice messages.

    Raises:
        MediaError: ffmpeg is missing, failed, or took longer than `timeout`.
    """
    if is_ogg_opus(data):
        return data
    ffmpeg = ffmpeg_path()
    if ffmpeg is None:
        raise MediaError(FFMPEG_HINT)
    command = [
        ffmpeg,
        "-hide_banner",
        "-loglevel",
        "error",
        "-i",
        "pipe:0",
        "-vn",
        "-map_metadata",
        "-1",
        "-c:a",
        "libopus",
        "-b:a",
        "32k",
        "-ac",
        "1",
        "-application",
        "voip",
        "-f",
        "ogg",
        "pipe:1",
    ]
    try:
        with anyio.fail_after(timeout):
            done = await anyio.run_process(command, input=data, check=False)
    except TimeoutError:
        raise MediaError(f"audio conversion took longer than {timeout:g} s") from None
    except OSError as exc:
        raise MediaError(f"ffmpeg could not be started: {exc}") from None
    if done.returncode != 0 or not done.stdout:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = detail[-1][:200] if detail else f"exit status {done.returncode}"
        raise MediaError(f"audio conversion failed: {reason}")
    if len(done.stdout) > MAX_OUTPUT_BYTES:
        raise MediaError("audio conversion produced too much data")
    return bytes(done.stdout)
