"""The media sections of `nodmix.json`: how images reach models (`agents.defaults.media`),
voice transcription (`tools.media`) and spoken replies (`messages.tts`)."""

from typing import Annotated, Literal

import msgspec

from nodmix.config.section import Section


class MediaConfig(Section, frozen=True):
    """`agents.defaults.media` (and per agent): images in conversations."""

    max_image_pixels: Annotated[int, msgspec.Meta(ge=64, le=8192)] | None = None
    """Images are downscaled so their long side is at most this many pixels before a model
    sees them (default 1568)."""
    keep_image_turns: Annotated[int, msgspec.Meta(ge=0, le=100)] | None = None
    """Images of the last this many user turns are sent to the model; older ones become a
    one-line placeholder (default 4)."""
    image_model: str | None = None
    """A vision model (`provider/model`) that describes images for a text-only model."""


class AudioToolConfig(Section, frozen=True):
    """`tools.media.audio`: voice notes and audio files transcribed to text."""

    enabled: bool | None = None
    """Transcribe (default true once `provider` is set)."""
    provider: str | None = None
    """A `models.providers` id whose OpenAI-compatible `/audio/transcriptions` is used."""
    model: str | None = None
    """The transcription model (default `whisper-1`)."""
    language: str | None = None
    """An ISO-639-1 hint (`en`, `de`); unset lets the model detect it."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=600)] | None = None
    """How long one transcription may take (default 120 s)."""


class ToolsMediaConfig(Section, frozen=True):
    """`tools.media`."""

    audio: AudioToolConfig | None = None


TtsAuto = Literal["off", "always", "inbound"]


class TtsConfig(Section, frozen=True):
    """`messages.tts`: replies spoken aloud in channels."""

    auto: TtsAuto | None = None
    """`off` (default), `always`, or `inbound` (only replies to a voice note)."""
    provider: str | None = None
    """A `models.providers` id whose OpenAI-compatible `/audio/speech` is used."""
    model: str | None = None
    """The speech model (default `tts-1`)."""
    voice: str | None = None
    """The voice (default `alloy`)."""
    format: Literal["mp3", "opus", "aac", "flac", "wav"] | None = None
    """The audio format asked of the provider (default `opus`); Telegram voice messages are
    converted to OGG/Opus whatever it is."""
    max_chars: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None
    """Longer replies go as text only (default 1500)."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=600)] | None = None
    """How long one synthesis may take (default 60 s)."""


class MessagesConfig(Section, frozen=True):
    """`messages`: how replies are delivered."""

    tts: TtsConfig | None = None
