"""The media settings in effect: `agents.defaults.media` (with an agent's own keys over it),
`tools.media.audio` and `messages.tts`, defaults filled in."""

from __future__ import annotations

from typing import Literal

import msgspec

from nodmix.config.media_schema import MediaConfig
from nodmix.config.schema import NodmixConfig

DEFAULT_MAX_SIDE = 1568
"""`agents.defaults.media.maxImagePixels`: the long side a model sees, in pixels."""

DEFAULT_KEEP_IMAGE_TURNS = 4
DEFAULT_TRANSCRIBE_MODEL = "whisper-1"
DEFAULT_SPEECH_MODEL = "tts-1"
DEFAULT_VOICE = "alloy"
DEFAULT_SPEECH_FORMAT = "opus"
DEFAULT_TTS_MAX_CHARS = 1500
DEFAULT_TRANSCRIBE_SECONDS = 120.0
DEFAULT_SPEECH_SECONDS = 60.0

AUDIO_HINT = (
    "Voice notes need transcription, which is not set up: set tools.media.audio to "
    '{"provider": "openai", "model": "whisper-1"} (any models.providers id with an '
    "OpenAI-compatible /audio/transcriptions)"
)
"""The one line a sender gets for a voice note while transcription is off."""


class ImageSettings(msgspec.Struct, frozen=True):
    """How one agent's requests carry images."""

    max_side: int = DEFAULT_MAX_SIDE
    keep_turns: int = DEFAULT_KEEP_IMAGE_TURNS
    image_model: str | None = None


class AudioSettings(msgspec.Struct, frozen=True):
    """`tools.media.audio`, resolved; `provider` None: transcription is off."""

    provider: str | None = None
    model: str = DEFAULT_TRANSCRIBE_MODEL
    language: str | None = None
    timeout_seconds: float = DEFAULT_TRANSCRIBE_SECONDS


class SpeechSettings(msgspec.Struct, frozen=True):
    """`messages.tts`, resolved; `provider` None: nothing is spoken."""

    auto: Literal["off", "always", "inbound"] = "off"
    provider: str | None = None
    model: str = DEFAULT_SPEECH_MODEL
    voice: str = DEFAULT_VOICE
    format: str = DEFAULT_SPEECH_FORMAT
    max_chars: int = DEFAULT_TTS_MAX_CHARS
    timeout_seconds: float = DEFAULT_SPEECH_SECONDS


def image_settings(config: NodmixConfig, agent_id: str) -> ImageSettings:
    """`agents.defaults.media` with the agent's `media` keys over it."""
    merged = MediaConfig()
    entry = next((a for a in config.agents.entries if a.id == agent_id), None)
    layers = (config.agents.defaults.media, entry.media if entry is not None else None)
    for layer in layers:
        if layer is None:
            continue
        merged = MediaConfig(
            max_image_pixels=layer.max_image_pixels or merged.max_image_pixels,
            keep_image_turns=(
                layer.keep_image_turns
                if layer.keep_image_turns is not None
                else merged.keep_image_turns
            ),
            image_model=layer.image_model or merged.image_model,
        )
    return ImageSettings(
        max_side=merged.max_image_pixels or DEFAULT_MAX_SIDE,
        keep_turns=(
            merged.keep_image_turns
            if merged.keep_image_turns is not None
            else DEFAULT_KEEP_IMAGE_TURNS
        ),
        image_model=merged.image_model,
    )


def audio_settings(config: NodmixConfig) -> AudioSettings:
    """`tools.media.audio`; off unless a provider is named and `enabled` is not false."""
    media = config.tools.media
    audio = media.audio if media is not None else None
    if audio is None or audio.provider is None or audio.enabled is False:
        return AudioSettings()
    return AudioSettings(
        provider=audio.provider,
        model=audio.model or DEFAULT_TRANSCRIBE_MODEL,
        language=audio.language,
        timeout_seconds=audio.timeout_seconds or DEFAULT_TRANSCRIBE_SECONDS,
    )


def speech_settings(config: NodmixConfig) -> SpeechSettings:
    """`messages.tts`."""
    tts = config.messages.tts
    if tts is None:
        return SpeechSettings()
    return SpeechSettings(
        auto=tts.auto or "off",
        provider=tts.provider,
        model=tts.model or DEFAULT_SPEECH_MODEL,
        voice=tts.voice or DEFAULT_VOICE,
        format=tts.format or DEFAULT_SPEECH_FORMAT,
        max_chars=tts.max_chars or DEFAULT_TTS_MAX_CHARS,
        timeout_seconds=tts.timeout_seconds or DEFAULT_SPEECH_SECONDS,
    )
