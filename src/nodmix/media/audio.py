"""Speech to text and text to speech through a provider's OpenAI-compatible audio endpoints:

- `POST {baseUrl}/audio/transcriptions` (multipart: `file`, `model`, optional `language`),
  answered with `{"text": ...}`;
- `POST {baseUrl}/audio/speech` (JSON: `model`, `input`, `voice`, `response_format`),
  answered with the audio bytes.

Every call has an overall deadline (a server that accepts the connection and then stalls, or
trickles bytes, fails at `timeoutSeconds`), and a spoken reply is read up to a byte cap.
Failures are `MediaError`s with one readable line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
import httpx2

from nodmix.media.errors import MediaError
from nodmix.media.settings import AudioSettings, SpeechSettings

MAX_SPEECH_BYTES = 20 << 20
"""The largest spoken reply read from a provider."""
CONNECT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class AudioEndpoint:
    """Where a provider's audio endpoints are, and how to authenticate."""

    provider: str
    base_url: str
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        """`{baseUrl}/{path}`."""
        return f"{self.base_url.rstrip('/')}/{path}"

    def request_headers(self) -> dict[str, str]:
        """The provider's headers plus `Authorization: Bearer` when there is a key."""
        out = dict(self.headers)
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out


def _failure(what: str, endpoint: AudioEndpoint, exc: Exception, seconds: float) -> MediaError:
    if isinstance(exc, httpx2.HTTPStatusError):
        body = exc.response.text.strip().replace("\n", " ")[:200]
        detail = f"HTTP {exc.response.status_code}" + (f": {body}" if body else "")
    elif isinstance(exc, TimeoutError | httpx2.TimeoutException):
        detail = f"no answer within {seconds:g} s"
    else:
        detail = str(exc).strip() or type(exc).__name__
    return MediaError(f"{what} failed ({endpoint.provider}): {detail}")


async def transcribe(
    endpoint: AudioEndpoint,
    data: bytes,
    *,
    filename: str,
    mime_type: str,
    settings: AudioSettings,
) -> str:
    """The text spoken in `data`.

    Raises:
        MediaError: the provider refused, failed, did not answer within the timeout, or
            answered without text.
    """
    form = {"model": settings.model, "response_format": "json"}
    if settings.language:
        form["language"] = settings.language
    timeout = httpx2.Timeout(settings.timeout_seconds, connect=CONNECT_SECONDS)
    try:
        with anyio.fail_after(settings.timeout_seconds):
            async with httpx2.AsyncClient(timeout=timeout) as client:
                response = await client.post(
                    endpoint.url("audio/transcriptions"),
                    headers=endpoint.request_headers(),
                    data=form,
                    files={"file": (filename, data, mime_type)},
                )
                response.raise_for_status()
                body = response.json()
    except Exception as exc:
        raise _failure("transcription", endpoint, exc, settings.timeout_seconds) from None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise MediaError(f"transcription failed ({endpoint.provider}): the answer has no text")
    return text.strip()


async def synthesize(endpoint: AudioEndpoint, text: str, settings: SpeechSettings) -> bytes:
    """`text` spoken, in `settings.format`.

    Raises:
        MediaError: the provider refused, failed, did not answer within the timeout, or
            answered with nothing or too much.
    """
    payload = {
        "model": settings.model,
        "input": text,
        "voice": settings.voice,
        "response_format": settings.format,
    }
    timeout = httpx2.Timeout(settings.timeout_seconds, connect=CONNECT_SECONDS)
    try:
        with anyio.fail_after(settings.timeout_seconds):
            async with (
                httpx2.AsyncClient(timeout=timeout) as client,
                client.stream(
                    "POST",
                    endpoint.url("audio/speech"),
                    headers=endpoint.request_headers(),
                    json=payload,
                ) as response,
            ):
                if response.status_code >= 400:
                    await response.aread()
                    response.raise_for_status()
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_SPEECH_BYTES:
                        raise MediaError(
                            f"speech failed ({endpoint.provider}): the audio is larger than "
                            f"{MAX_SPEECH_BYTES >> 20} MB"
                        )
                    chunks.append(chunk)
    except MediaError:
        raise
    except Exception as exc:
        raise _failure("speech", endpoint, exc, settings.timeout_seconds) from None
    audio = b"".join(chunks)
    if not audio:
        raise MediaError(f"speech failed ({endpoint.provider}): the answer was empty")
    return audio
