"""Pictures and voice messages through Matrix: matrix-nio against a real Synapse, the model and
its audio endpoints behind the scripted model server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx2
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts
from tests.channels.synapse import MatrixUser, Synapse, wait_for
from tests.media.samples import needs_ffmpeg, photo, voice_note
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration


def _upload(user: MatrixUser, data: bytes, mime: str) -> str:
    with httpx2.Client(base_url=user.url, timeout=30.0) as http:
        response = http.post(
            "/_matrix/media/v3/upload",
            content=data,
            headers={"Authorization": f"Bearer {user.token}", "Content-Type": mime},
        )
    response.raise_for_status()
    return str(response.json()["content_uri"])


def _setup(
    state: Path, synapse: Synapse, model: ScriptedModelServer, **top: Any
) -> tuple[MatrixUser, MatrixUser, BackgroundGateway]:
    bot = synapse.register(f"bot{uuid.uuid4().hex[:8]}")
    owner = synapse.register(f"owner{uuid.uuid4().hex[:8]}")
    section = {"homeserver": synapse.url, "userId": bot.user_id, "accessToken": bot.token}
    config = scripted_config(
        model.base_url, channels={"matrix": {**section, "allowFrom": [owner.user_id]}}, **top
    )
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    return bot, owner, gateway


def test_a_matrix_image_reaches_the_vision_model_and_a_huge_file_is_never_fetched(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    bot, owner, gateway = _setup(isolated_state, synapse, model)
    picture = photo(1200, 900)
    with gateway:
        room = owner.create_room([bot.user_id], direct=True)
        wait_for(lambda: owner.members(room).get(bot.user_id) == "join", "the bot to join")
        url = _upload(owner, picture, "image/jpeg")
        info = {"mimetype": "image/jpeg", "size": len(picture), "w": 1200, "h": 900}
        owner.send(room, {"msgtype": "m.image", "body": "garden.jpg", "url": url, "info": info})
        wait_for(lambda: owner.texts(room, bot.user_id), "the reply to the image")
        huge = {"mimetype": "application/zip", "size": 2 * 1024**3}
        owner.send(room, {"msgtype": "m.file", "body": "all.zip", "url": url, "info": huge})
        texts = wait_for(
            lambda: len(owner.texts(room, bot.user_id)) >= 2 and owner.texts(room, bot.user_id),
            "the refusal",
        )
    assert len(model.images()) == 1 and len(model.requests) == 1
    assert "garden.jpg" in json.dumps(model.requests[0].body)
    assert texts[1].startswith("That file is 2 GB, larger than the 20 MB")
    assert [p.read_bytes() for p in (isolated_state / "workspace" / "inbox").iterdir()] == [picture]


def test_a_matrix_voice_message_is_transcribed(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    bot, owner, gateway = _setup(
        isolated_state, synapse, model, tools={"media": {"audio": {"provider": "local"}}}
    )
    note = voice_note()
    with gateway:
        room = owner.create_room([bot.user_id], direct=True)
        wait_for(lambda: owner.members(room).get(bot.user_id) == "join", "the bot to join")
        url = _upload(owner, note, "audio/ogg")
        owner.send(
            room,
            {
                "msgtype": "m.audio",
                "body": "Voice message",
                "url": url,
                "info": {"mimetype": "audio/ogg", "size": len(note), "duration": 1000},
                "org.matrix.msc3245.voice": {},
            },
        )
        wait_for(lambda: owner.texts(room, bot.user_id), "the reply to the voice message")
    heard = model_user_texts(model)[0]
    assert heard.startswith("[voice note inbox/") and heard.endswith("calendar tomorrow")
    assert model.audio_calls[0].file_data == note
