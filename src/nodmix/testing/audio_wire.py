"""The audio endpoints of the scripted model server (OpenAI's shapes):

- `POST /v1/audio/transcriptions` (multipart `file`, `model`, ...) answers `{"text": ...}`
  from a transcribe function (`(audio bytes, file name) -> text`, sync or async: an async
  one that never returns stands in for a server that hangs);
- `POST /v1/audio/speech` (JSON `model`, `input`, `voice`, `response_format`) answers real
  audio: a short tone as WAV, converted by ffmpeg for `opus` (OGG/Opus), `mp3`, `aac` and
  `flac`, so what a client gets decodes like a provider's.

Requests are recorded (`AudioCall`), files and all.
"""

from __future__ import annotations

import inspect
import io
import math
import shutil
import struct
import subprocess
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Transcribe = Callable[[bytes, str], "str | Awaitable[str]"]

SAMPLE_RATE = 16_000
_FFMPEG_FORMATS = {
    "opus": (["-c:a", "libopus", "-b:a", "24k", "-f", "ogg"], "audio/ogg"),
    "mp3": (["-c:a", "libmp3lame", "-b:a", "32k", "-f", "mp3"], "audio/mpeg"),
    "aac": (["-c:a", "aac", "-b:a", "32k", "-f", "adts"], "audio/aac"),
    "flac": (["-c:a", "flac", "-f", "flac"], "audio/flac"),
}


def default_transcribe(data: bytes, name: str) -> str:
    """What the scripted server hears in any audio: a fixed sentence."""
    return "what is on my calendar tomorrow"


@dataclass
class AudioCall:
    """One audio request the server received."""

    path: str
    fields: dict[str, str]
    """Form fields (transcriptions) or JSON members (speech), as text."""
    file_name: str | None = None
    file_type: str | None = None
    file_data: bytes = b""


@dataclass
class AudioState:
    """What the audio endpoints share with the server object."""

    transcribe: Transcribe = default_transcribe
    calls: list[AudioCall] = field(default_factory=list)


def tone_wav(seconds: float, frequency: float = 440.0) -> bytes:
    """A mono 16-bit sine tone as a WAV file (the standard library's `wave` writer)."""
    frames = int(SAMPLE_RATE * seconds)
    samples = (
        int(12000 * math.sin(2 * math.pi * frequency * i / SAMPLE_RATE)) for i in range(frames)
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return out.getvalue()


def encode(wav: bytes, fmt: str) -> tuple[bytes, str]:
    """`wav` in `fmt` (ffmpeg for the compressed formats); the bytes and their MIME type.

    Raises:
        RuntimeError: ffmpeg is missing or failed.
    """
    if fmt in ("wav", "pcm"):
        return (wav if fmt == "wav" else wav[44:]), "audio/wav"
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError(f"the scripted server needs ffmpeg to produce {fmt}")
    args, mime = _FFMPEG_FORMATS[fmt]
    done = subprocess.run(
        [ffmpeg, "-hide_banner", "-loglevel", "error", "-i", "pipe:0", *args, "pipe:1"],
        input=wav,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode("utf-8", "replace").strip())
    return done.stdout, mime


def _error(status: int, message: str) -> JSONResponse:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return JSONResponse(body, status_code=status)


def audio_routes(state: AudioState, authorized: Callable[[Request], bool]) -> list[Route]:
    """`/v1/audio/transcriptions` and `/v1/audio/speech`."""

    async def transcriptions(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "invalid api key")
        async with request.form() as form:
            upload = form.get("file")
            fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
            if upload is None or isinstance(upload, str):
                return _error(400, "a multipart 'file' is required")
            data = await upload.read()
            call = AudioCall(
                request.url.path, fields, upload.filename, upload.content_type, file_data=data
            )
        state.calls.append(call)
        if "model" not in fields:
            return _error(400, "'model' is required")
        if not data:
            return _error(400, "the audio file is empty")
        text: Any = state.transcribe(data, upload.filename or "audio")
        if inspect.isawaitable(text):
            text = await text
        return JSONResponse({"text": str(text)})

    async def speech(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "invalid api key")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("input"), str):
            return _error(400, "'input' is required")
        fields = {k: str(v) for k, v in body.items()}
        state.calls.append(AudioCall(request.url.path, fields))
        fmt = str(body.get("response_format") or "mp3")
        if fmt not in (*_FFMPEG_FORMATS, "wav", "pcm"):
            return _error(400, f"unsupported response_format {fmt!r}")
        seconds = min(3.0, 0.3 + len(body["input"]) / 60)
        try:
            audio, mime = await anyio.to_thread.run_sync(encode, tone_wav(seconds), fmt)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            return _error(500, str(exc))
        return Response(audio, media_type=mime)

    return [
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/speech", speech, methods=["POST"]),
    ]
