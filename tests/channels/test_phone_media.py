"""Pictures and voice notes through WhatsApp (pywa against the scripted Cloud API) and Signal
(the scripted signal-cli daemon): an image reaches a vision model through the media package,
a voice note is transcribed and answered with a voice note."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts
from tests.media.samples import needs_ffmpeg, ogg_opus_channels, photo, voice_note
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration

WA_OWNER = "15550104242"
SIGNAL_OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"
SPOKEN = {
    "tools": {"media": {"audio": {"provider": "local"}}},
    "messages": {"tts": {"auto": "inbound", "provider": "local"}},
}


def _write(state: Path, model: ScriptedModelServer, channels: dict[str, Any], **top: Any) -> None:
    config = scripted_config(model.base_url, channels=channels, **top)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_a_whatsapp_photo_reaches_the_vision_model(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedWhatsApp() as wa:
        _write(isolated_state, model, {"whatsapp": wa.config(allowFrom=[WA_OWNER])})
        with _gateway() as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            wa.inject_media(WA_OWNER, "image", photo(640, 480), "image/jpeg", caption="look")
            wa.wait_for(lambda: wa.sent_texts(WA_OWNER))
        assert len(wa.downloads) == 1
    assert len(model.images()) == 1
    assert model_user_texts(model)[0].startswith("look")


def test_a_whatsapp_voice_note_is_transcribed_and_answered_with_a_voice_note(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    with ScriptedWhatsApp() as wa:
        _write(isolated_state, model, {"whatsapp": wa.config(allowFrom=[WA_OWNER])}, **SPOKEN)
        with _gateway() as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            wa.inject_media(WA_OWNER, "audio", voice_note(), "audio/ogg; codecs=opus", voice=True)
            wa.wait_for(lambda: [m for m in wa.messages(WA_OWNER) if m["type"] == "audio"])
        uploads = [c.body for c in wa.calls if c.path.endswith("/media")]
        media_id = next(m for m in wa.messages(WA_OWNER) if m["type"] == "audio")["audio"]["id"]
        data, mime = wa.media[media_id]
    heard = model_user_texts(model)[0]
    assert heard.startswith("[voice note inbox/") and "what is on my calendar" in heard
    assert uploads and mime.startswith("audio/ogg") and ogg_opus_channels(data) == 1


@pytest.fixture
def daemon() -> Iterator[ScriptedSignalDaemon]:
    with (
        tempfile.TemporaryDirectory(prefix="nsig", dir="/tmp") as folder,
        ScriptedSignalDaemon(socket_path=Path(folder) / "s.sock") as server,
    ):
        yield server


def _signal_connected(gateway: BackgroundGateway, daemon: ScriptedSignalDaemon) -> None:
    status = gateway.runtime.channels.statuses
    daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)


def test_a_signal_photo_reaches_the_vision_model(
    isolated_state: Path, model: ScriptedModelServer, daemon: ScriptedSignalDaemon
) -> None:
    _write(isolated_state, model, {"signal": daemon.config(allowFrom=[SIGNAL_OWNER])})
    with _gateway() as gateway:
        _signal_connected(gateway, daemon)
        daemon.inject_attachment(SIGNAL_OWNER, photo(640, 480), "image/jpeg", text="look")
        daemon.wait_for(lambda: daemon.sent_texts(SIGNAL_OWNER))
    assert len(daemon.calls_of("getAttachment")) == 1
    assert len(model.images()) == 1
    assert model_user_texts(model)[0].startswith("look")


def test_a_signal_voice_note_is_transcribed_and_answered_with_a_voice_note(
    isolated_state: Path, model: ScriptedModelServer, daemon: ScriptedSignalDaemon
) -> None:
    needs_ffmpeg()
    section = daemon.config(socket=True, allowFrom=[SIGNAL_OWNER])
    _write(isolated_state, model, {"signal": section}, **SPOKEN)
    with _gateway() as gateway:
        _signal_connected(gateway, daemon)
        daemon.inject_attachment(SIGNAL_OWNER, voice_note(), "audio/ogg")
        sent = daemon.wait_for(lambda: [s for s in daemon.sent if s.attachments])
    heard = model_user_texts(model)[0]
    assert heard.startswith("[voice note inbox/") and "what is on my calendar" in heard
    mime, _, data = sent[0].attachments[0]
    assert sent[0].voice_note and mime == "audio/ogg" and ogg_opus_channels(data) == 1
