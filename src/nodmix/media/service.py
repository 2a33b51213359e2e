"""The media parts one runtime shares, wired by the composition root (`runtime/core.py`):
the prepared-image cache and request resolver, the ingest of saved files into a turn's user
message, transcription and speech through the configured providers, and per-chat `/tts`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from nodmix.config.schema import NodmixConfig
from nodmix.errors import NodmixError
from nodmix.media.cache import ImageCache
from nodmix.media.errors import MediaError
from nodmix.media.resolver import ImageResolver
from nodmix.media.settings import (
    AUDIO_HINT,
    SpeechSettings,
    audio_settings,
    image_settings,
    speech_settings,
)
from nodmix.messages import ImageBlock, ImageRefBlock, UserMessage
from nodmix.providers.base import ModelSpec

if TYPE_CHECKING:
    from nodmix.media.audio import AudioEndpoint
    from nodmix.media.files import InboundFile
    from nodmix.media.ingest import Describe
    from nodmix.media.prefs import SpeechPrefs

OPENAI_API = "openai-completions"


class ProviderDefinitionLike(Protocol):
    @property
    def api(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class Models(Protocol):
    """What media needs of the provider router."""

    def resolve(self, ref: str) -> Any: ...

    def definition(self, provider_id: str) -> ProviderDefinitionLike: ...

    def api_key(self, provider_id: str) -> str | None: ...


class MediaService:
    """Images, voice in and voice out for one runtime."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        models: Callable[[], Models],
        *,
        state_dir: Path,
        prefs: SpeechPrefs | None = None,
    ) -> None:
        """`config` and `models` are read per use (a reload replaces both)."""
        self._config = config
        self._models = models
        self.cache = ImageCache()
        self.images = ImageResolver(self.cache, lambda agent_id: image_settings(config(), agent_id))
        """What the agent loop asks for the images of each request."""
        self._prefs = prefs
        self._state_dir = state_dir

    @property
    def prefs(self) -> SpeechPrefs:
        """Per-chat `/tts on|off` (a file store under the state dir unless given one)."""
        if self._prefs is None:
            from nodmix.media.prefs import FileSpeechPrefs

            self._prefs = FileSpeechPrefs(self._state_dir)
        return self._prefs

    # ---- voice ------------------------------------------------------------------------------

    def audio_endpoint(self, provider_id: str, key: str) -> AudioEndpoint:
        """The provider's audio endpoint (`key`: the config key that named it).

        Raises:
            MediaError: no such provider, not OpenAI-compatible, or no API key.
        """
        from nodmix.media.audio import AudioEndpoint

        models = self._models()
        try:
            definition = models.definition(provider_id)
            api_key = models.api_key(provider_id)
        except NodmixError as exc:
            raise MediaError(f"{key}: {exc}") from None
        if definition.api != OPENAI_API:
            raise MediaError(
                f"{key}: provider {provider_id!r} speaks {definition.api}, which has no audio "
                "endpoints; name a provider with an OpenAI-compatible API"
            )
        return AudioEndpoint(
            provider=provider_id,
            base_url=definition.base_url,
            api_key=api_key,
            headers=dict(definition.headers),
        )

    async def transcribe(self, data: bytes, file: InboundFile, mime_type: str) -> str:
        """The text spoken in an audio file.

        Raises:
            MediaError: transcription is off (the line says how to turn it on) or failed.
        """
        from nodmix.media.audio import transcribe

        settings = audio_settings(self._config())
        if settings.provider is None:
            raise MediaError(AUDIO_HINT)
        endpoint = self.audio_endpoint(settings.provider, "tools.media.audio.provider")
        return await transcribe(
            endpoint, data, filename=Path(file.path).name, mime_type=mime_type, settings=settings
        )

    def speech(self) -> SpeechSettings:
        """`messages.tts` in effect."""
        return speech_settings(self._config())

    async def speak(self, text: str) -> bytes:
        """`text` spoken through `messages.tts.provider`.

        Raises:
            MediaError: no provider set, or the synthesis failed.
        """
        from nodmix.media.audio import synthesize

        settings = self.speech()
        if settings.provider is None:
            raise MediaError("messages.tts.provider is not set, so replies cannot be spoken")
        endpoint = self.audio_endpoint(settings.provider, "messages.tts.provider")
        return await synthesize(endpoint, text, settings)

    # ---- images -----------------------------------------------------------------------------

    async def user_message(
        self,
        text: str,
        files: Sequence[InboundFile],
        *,
        agent_id: str,
        workspace: Path,
        model: ModelSpec | None,
        transcribe: bool = True,
    ) -> UserMessage:
        """The turn's user message for `text` and its saved files (`model`: the one the turn
        starts with; a text-only one gets image descriptions when `imageModel` is set;
        `transcribe` false names audio files instead: a check before the turn, history).

        Raises:
            MediaError: a file cannot be used (the message is the sender's reply).
        """
        from nodmix.media.describe import describe_image
        from nodmix.media.ingest import IngestParts, user_message

        settings = image_settings(self._config(), agent_id)

        async def prepare(ref: ImageRefBlock) -> ImageBlock:
            return await anyio.to_thread.run_sync(
                self.images.remember, ref, workspace, settings.max_side
            )

        describe: Describe | None = None
        describer = settings.image_model
        if describer and model is not None and not model.sees_images:

            async def describe_one(image: ImageBlock, caption: str) -> str | None:
                return await describe_image(self._models(), describer, image, caption=caption)

            describe = describe_one
        parts = IngestParts(
            prepare=prepare,
            transcribe=self.transcribe if transcribe else None,
            describe=describe,
        )
        return await user_message(text, files, workspace=workspace, parts=parts)
