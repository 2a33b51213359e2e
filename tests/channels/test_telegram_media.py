"""Photos and voice notes through Telegram and a real gateway: python-telegram-bot against the
scripted Bot API, the model (and its audio endpoints) behind the scripted model server."""

from __future__ import annotations

import base64
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts
from tests.media.samples import needs_ffmpeg, noise, ogg_opus_channels, photo, voice_note
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration

OWNER = 4242


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


def _config(
    state: Path,
    model: ScriptedModelServer,
    api: ScriptedBotAPI,
    *,
    vision: bool = True,
    telegram: dict[str, Any] | None = None,
    **top: Any,
) -> None:
    config = scripted_config(model.base_url, **top)
    entry = config["models"]["providers"]["local"]["models"][0]
    if vision:
        entry["input"] = ["text", "image"]
    section = {
        "botToken": api.token,
        "apiBaseUrl": api.url,
        "pollTimeoutSeconds": 1,
        "allowFrom": [OWNER],
        **(telegram or {}),
    }
    config["channels"] = {"telegram": section}
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _transcript_text(state: Path) -> str:
    files = sorted((state / "agents" / "main" / "sessions").glob("*.jsonl"))
    return "".join(f.read_text(encoding="utf-8") for f in files)


def test_a_photo_reaches_a_vision_model_as_a_downscaled_image_kept_by_reference(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, api)
    sent = photo(4000, 3000)
    with _gateway():
        api.inject_media(
            chat_id=OWNER, sender_id=OWNER, kind="photo", data=sent, caption="what plant is this?"
        )
        api.wait_for(lambda: api.sent_texts(OWNER))
    images = model.images()
    assert len(images) == 1
    shown = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
    assert max(shown.size) == 1568 and shown.size == (1568, 1176)
    assert images[0].mime_type == "image/jpeg"
    assert "what plant is this?" in model_user_texts(model)[0]
    saved = list((isolated_state / "workspace" / "inbox").iterdir())
    assert [p.read_bytes() for p in saved] == [sent], "the original stays in inbox/"
    transcript = _transcript_text(isolated_state)
    assert '"type":"imageRef"' in transcript and saved[0].name in transcript
    assert images[0].data[:200] not in transcript, "no base64 in the transcript"


def test_a_photo_to_a_text_only_model_becomes_its_file_name_and_a_note(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, api, vision=False)
    with _gateway():
        api.inject_media(
            chat_id=OWNER, sender_id=OWNER, kind="photo", data=photo(), caption="and this?"
        )
        api.wait_for(lambda: api.sent_texts(OWNER))
    assert model.images() == []
    body = json.dumps(model.requests[-1].body)
    assert "image_url" not in body
    user = model_user_texts(model)[0]
    assert user.startswith("and this?")
    assert "this model cannot see images" in body and "inbox/" in body


def test_a_voice_note_is_transcribed_and_answered_with_a_voice_message(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    audio = {"provider": "local", "model": "whisper-1"}
    tts = {"auto": "inbound", "provider": "local", "voice": "nova"}
    _config(isolated_state, model, api, tools={"media": {"audio": audio}}, messages={"tts": tts})
    note = voice_note()
    with _gateway():
        api.inject_media(chat_id=OWNER, sender_id=OWNER, kind="voice", data=note)
        voices = api.wait_for(lambda: api.sent_files("sendVoice"))
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="typed, not spoken")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2)
    transcription = next(c for c in model.audio_calls if c.path.endswith("transcriptions"))
    assert transcription.file_data == note and transcription.fields["model"] == "whisper-1"
    heard = model_user_texts(model)[0]
    assert heard.startswith("[voice note inbox/") and ", transcribed]" in heard
    assert heard.endswith("what is on my calendar tomorrow")
    assert api.sent_texts(OWNER)[0] == heard  # the echo model answers with what it heard
    speech = next(c for c in model.audio_calls if c.path.endswith("speech"))
    assert speech.fields["voice"] == "nova" and "calendar tomorrow" in speech.fields["input"]
    name, data = voices[0]
    assert name == "reply.ogg" and ogg_opus_channels(data) == 1
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", "-"],
        input=data,
        capture_output=True,
        check=True,
    )
    assert probe.stdout.decode().strip() == "opus"
    assert len(api.sent_files("sendVoice")) == 1, "a typed message gets no voice reply"
    inbox = isolated_state / "workspace" / "inbox"
    assert [p.read_bytes() for p in inbox.iterdir()] == [note], "the audio stays in inbox/"


def test_tts_on_makes_every_reply_in_the_chat_spoken_and_off_stops_it(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    tts = {"auto": "off", "provider": "local", "format": "mp3"}
    _config(isolated_state, model, api, messages={"tts": tts})
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/tts on")
        api.wait_for(lambda: api.sent_texts(OWNER))
        assert "Spoken replies: on" in api.sent_texts(OWNER)[0]
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="say this")
        voices = api.wait_for(lambda: api.sent_files("sendVoice"))
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/tts off")
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="quiet now")
        api.wait_for(lambda: "quiet now" in api.sent_texts(OWNER))
    assert ogg_opus_channels(voices[0][1]) == 1, "mp3 from the provider, converted by ffmpeg"
    assert len(api.sent_files("sendVoice")) == 1
    prefs = json.loads((isolated_state / "media" / "tts.json").read_text())
    assert prefs == {f"telegram:{OWNER}": False}


def test_a_voice_note_without_transcription_gets_one_line_on_how_to_enable_it(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    _config(isolated_state, model, api)
    with _gateway():
        api.inject_media(chat_id=OWNER, sender_id=OWNER, kind="voice", data=voice_note())
        texts = api.wait_for(lambda: api.sent_texts(OWNER))
    assert len(texts) == 1 and "tools.media.audio" in texts[0]
    assert "\n" not in texts[0]
    assert model.requests == [] and model.audio_calls == []


@pytest.mark.parametrize(
    ("kind", "data", "expected"),
    [
        ("photo", b"\xff\xd8\xff\xe0 not really a jpeg" * 10, "That photo could not be used"),
        ("photo", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "SVG images are not supported"),
        ("voice", b"", "That voice note is empty (0 bytes)"),
        ("voice", b"\x7fELF\x02\x01\x01" + b"\x00" * 200, "not audio in a format Nodmix knows"),
    ],
    ids=["corrupt-photo", "svg-photo", "empty-voice", "executable-voice"],
)
def test_bad_media_gets_one_clear_reply_and_the_channel_keeps_working(
    isolated_state: Path,
    api: ScriptedBotAPI,
    model: ScriptedModelServer,
    kind: str,
    data: bytes,
    expected: str,
) -> None:
    audio = {"provider": "local"}
    _config(isolated_state, model, api, tools={"media": {"audio": audio}})
    with _gateway():
        api.inject_media(chat_id=OWNER, sender_id=OWNER, kind=kind, data=data)
        first = api.wait_for(lambda: api.sent_texts(OWNER))
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="still there?")
        api.wait_for(lambda: "still there?" in api.sent_texts(OWNER))
    assert expected in first[0] and "\n" not in first[0]
    assert model_user_texts(model) == ["still there?"], "the bad file never reached the model"
    assert model.audio_calls == []


def test_an_attachment_over_the_cap_is_refused_before_download_and_never_written(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, api, telegram={"maxAttachmentBytes": 100 * 1024})
    with _gateway():
        api.inject_media(
            chat_id=OWNER,
            sender_id=OWNER,
            kind="document",
            data=b"x" * 1000,
            file_name="huge.bin",
            declared_size=2 * 1024**3,
        )
        declared = api.wait_for(lambda: api.sent_texts(OWNER))
        # A file that declares a small size and is larger: stopped while it streams.
        api.inject_media(
            chat_id=OWNER,
            sender_id=OWNER,
            kind="photo",
            data=noise(400, 400),
            declared_size=5000,
        )
        streamed = api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2 and api.sent_texts(OWNER))
    assert declared[0].startswith("That file is 2 GB, larger than the 100 KB")
    assert streamed[1].startswith("That photo is 469 KB, larger than the 100 KB")
    assert "maxAttachmentBytes" in streamed[1]
    assert api.downloads == ["photo-2"], "the declared 2 GB file was never fetched"
    assert not (isolated_state / "workspace" / "inbox").exists() or not any(
        (isolated_state / "workspace" / "inbox").iterdir()
    )
    assert model.requests == []


async def _hang(data: bytes, name: str) -> str:
    await anyio.sleep_forever()
    raise AssertionError


def test_a_transcription_server_that_hangs_gets_one_line_after_the_timeout(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    needs_ffmpeg()
    with ScriptedModelServer(echo, transcribe=_hang) as hanging:
        audio = {"provider": "local", "timeoutSeconds": 1}
        _config(isolated_state, hanging, api, tools={"media": {"audio": audio}})
        with _gateway():
            api.inject_media(chat_id=OWNER, sender_id=OWNER, kind="voice", data=voice_note())
            first = api.wait_for(lambda: api.sent_texts(OWNER))
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="typed instead")
            api.wait_for(lambda: "typed instead" in api.sent_texts(OWNER))
        assert first == [
            "That voice note could not be transcribed: transcription failed (local): "
            "no answer within 1 s"
        ]
        assert model_user_texts(hanging) == ["typed instead"]


def test_a_text_only_model_gets_what_the_image_model_saw(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        if request.model.id == "eyes":
            return ModelReply.text("A fiddle-leaf fig in a clay pot, one leaf browning.")
        return echo(request)

    model.respond = respond
    config = scripted_config(model.base_url)
    config["models"]["providers"]["local"]["models"].append(
        {"id": "eyes", "input": ["text", "image"]}
    )
    config["agents"]["defaults"]["media"] = {"imageModel": "local/eyes"}
    section = {"botToken": api.token, "apiBaseUrl": api.url, "pollTimeoutSeconds": 1}
    config["channels"] = {"telegram": {**section, "allowFrom": [OWNER]}}
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    with _gateway():
        api.inject_media(
            chat_id=OWNER, sender_id=OWNER, kind="photo", data=photo(), caption="what plant?"
        )
        api.wait_for(lambda: api.sent_texts(OWNER))
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="and now?")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2)
    describer, first, second = (r.request for r in model.requests)
    assert describer is not None and describer.model.id == "eyes" and len(model.images(0)) == 1
    assert first is not None and first.model.id == "scripted" and model.images(1) == []
    said = json.dumps(model.requests[1].body)
    assert "described by an image model: A fiddle-leaf fig in a clay pot" in said
    assert "fiddle-leaf fig" in json.dumps(model.requests[2].body), "kept with the reference"
    assert len(model.requests) == 3, "described once, not on every request"


def test_without_ffmpeg_the_spoken_reply_goes_as_an_audio_file_and_the_status_says_why(
    isolated_state: Path,
    api: ScriptedBotAPI,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    tts = {"auto": "always", "provider": "local", "format": "wav"}
    _config(isolated_state, model, api, messages={"tts": tts})
    with _gateway() as gateway:
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="read this aloud")
        audio = api.wait_for(lambda: api.sent_files("sendAudio"))
        status = gateway.runtime.channels.statuses["telegram"]
        assert status.last_error is not None and "ffmpeg is missing" in status.last_error
    assert api.sent_texts(OWNER) == ["read this aloud"], "the text went first, unchanged"
    name, data = audio[0]
    assert name == "reply.wav" and data[:4] == b"RIFF"
    assert api.sent_files("sendVoice") == []
