"""Transcription and speech against the scripted model server's real audio endpoints:
answers, refusals, and a server that never answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from nodmix.config.schema import ModelsConfig, NodmixConfig, ProviderConfig
from nodmix.media.audio import AudioEndpoint, synthesize, transcribe
from nodmix.media.convert import is_ogg_opus, to_ogg_opus
from nodmix.media.errors import MediaError
from nodmix.media.files import InboundFile
from nodmix.media.service import MediaService
from nodmix.media.settings import AudioSettings, SpeechSettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.router import ProviderRouter
from nodmix.testing.audio_wire import tone_wav
from nodmix.testing.model_server import ScriptedModelServer
from tests.media.samples import needs_ffmpeg, ogg_opus_channels

pytestmark = pytest.mark.integration


async def _hang(data: bytes, name: str) -> str:
    await anyio.sleep_forever()
    raise AssertionError


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda r: ModelReply.text("x"), api_key="sk-audio") as running:
        yield running


def _endpoint(server: ScriptedModelServer, key: str | None = "sk-audio") -> AudioEndpoint:
    return AudioEndpoint(provider="local", base_url=server.base_url, api_key=key)


def test_a_transcription_posts_the_file_and_model_and_returns_the_text(
    server: ScriptedModelServer,
) -> None:
    wav = tone_wav(0.2)
    settings = AudioSettings(provider="local", model="whisper-large", language="de")
    text = anyio.run(
        lambda: transcribe(
            _endpoint(server), wav, filename="note.wav", mime_type="audio/wav", settings=settings
        )
    )
    assert text == "what is on my calendar tomorrow"
    call = server.audio_calls[0]
    assert call.file_data == wav and call.file_name == "note.wav" and call.file_type == "audio/wav"
    assert call.fields["model"] == "whisper-large" and call.fields["language"] == "de"


def test_a_refused_key_is_one_line_naming_the_provider(server: ScriptedModelServer) -> None:
    with pytest.raises(MediaError, match=r"transcription failed \(local\): HTTP 401"):
        anyio.run(
            lambda: transcribe(
                _endpoint(server, "wrong"),
                tone_wav(0.1),
                filename="a.wav",
                mime_type="audio/wav",
                settings=AudioSettings(provider="local"),
            )
        )


def test_a_transcription_server_that_hangs_fails_at_the_timeout() -> None:
    with ScriptedModelServer(lambda r: ModelReply.text("x"), transcribe=_hang) as hanging:
        settings = AudioSettings(provider="local", timeout_seconds=1.0)
        started = time.monotonic()
        with pytest.raises(MediaError, match="no answer within 1 s"):
            anyio.run(
                lambda: transcribe(
                    _endpoint(hanging, None),
                    tone_wav(0.1),
                    filename="a.wav",
                    mime_type="audio/wav",
                    settings=settings,
                )
            )
        assert time.monotonic() - started < 5


def test_speech_returns_audio_in_the_asked_format(server: ScriptedModelServer) -> None:
    needs_ffmpeg()
    settings = SpeechSettings(provider="local", voice="nova", format="opus")
    audio = anyio.run(lambda: synthesize(_endpoint(server), "good morning", settings))
    assert is_ogg_opus(audio) and ogg_opus_channels(audio) == 1
    assert server.audio_calls[0].fields == {
        "model": "tts-1",
        "input": "good morning",
        "voice": "nova",
        "response_format": "opus",
    }


def test_mp3_speech_is_converted_to_ogg_opus_by_ffmpeg(server: ScriptedModelServer) -> None:
    needs_ffmpeg()
    mp3 = anyio.run(
        lambda: synthesize(_endpoint(server), "hi", SpeechSettings(provider="local", format="mp3"))
    )
    assert mp3[:3] == b"ID3" or mp3[:2] == b"\xff\xfb"
    converted = anyio.run(lambda: to_ogg_opus(mp3))
    assert ogg_opus_channels(converted) == 1


def test_without_ffmpeg_conversion_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MediaError, match=r"ffmpeg is missing.*apt-get install ffmpeg"):
        anyio.run(lambda: to_ogg_opus(tone_wav(0.1)))


def test_an_executable_given_to_ffmpeg_is_a_conversion_error_not_a_crash() -> None:
    needs_ffmpeg()
    with pytest.raises(MediaError, match="audio conversion failed"):
        anyio.run(lambda: to_ogg_opus(b"\x7fELF\x02\x01\x01" + b"\x00" * 4000))


def _service(config: NodmixConfig) -> MediaService:
    router = ProviderRouter(config.models, {})
    return MediaService(lambda: config, lambda: router, state_dir=Path("/nonexistent"))


def test_the_service_says_how_to_enable_transcription_and_refuses_anthropic_providers() -> None:
    off = _service(NodmixConfig())
    file = InboundFile(path="inbox/a.ogg", kind="voice")
    with pytest.raises(MediaError, match=r"tools\.media\.audio"):
        anyio.run(lambda: off.transcribe(b"OggS", file, "audio/ogg"))
    providers = {"claude": ProviderConfig(api="anthropic-messages", base_url="http://x")}
    anthropic = msgspec_replace(NodmixConfig(), models=ModelsConfig(providers=providers))
    with pytest.raises(MediaError, match="has no audio endpoints"):
        _service(anthropic).audio_endpoint("claude", "tools.media.audio.provider")


def msgspec_replace(config: NodmixConfig, **changes: object) -> NodmixConfig:
    return msgspec.structs.replace(config, **changes)
