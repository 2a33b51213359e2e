"""Pictures and audio through Discord (discord.py) and Slack (Bolt) against their scripted
servers: an image reaches a vision model, an audio file is transcribed and answered with an
audio file, and a file over the cap is refused before it is fetched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.slack_server import ScriptedSlack
from tests.channels.support import model_user_texts
from tests.media.samples import needs_ffmpeg, photo, voice_note
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration

OWNER = "U0OWNER"


def _write(state: Path, model: ScriptedModelServer, channels: dict[str, Any], **top: Any) -> None:
    config = scripted_config(model.base_url, channels=channels, **top)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_a_discord_image_reaches_the_vision_model(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedDiscord() as discord:
        section = {"token": discord.token, "apiBaseUrl": discord.api_url, "allowFrom": ["42"]}
        _write(isolated_state, model, {"discord": section})
        with _gateway():
            discord.inject_dm(sender_id="42", text="look", attachment=("cat.jpg", photo(640, 480)))
            discord.wait_for(lambda: discord.sent_texts(discord.dm_channel("42")))
    assert len(model.images()) == 1
    assert model_user_texts(model)[0].startswith("look")


def test_a_slack_audio_file_is_transcribed_and_answered_with_an_audio_file(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    needs_ffmpeg()
    with ScriptedSlack() as slack:
        section = {
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
        }
        tts = {"auto": "inbound", "provider": "local", "format": "mp3"}
        _write(
            isolated_state,
            model,
            {"slack": section},
            tools={"media": {"audio": {"provider": "local"}}},
            messages={"tts": tts},
        )
        with _gateway():
            slack.inject_message(
                channel="D0OWNER",
                user=OWNER,
                text="",
                channel_type="im",
                file=("memo.ogg", voice_note()),
            )
            uploads = slack.wait_for(lambda: slack.uploaded())
    heard = model_user_texts(model)[0]
    assert heard.startswith("[audio file inbox/") and "what is on my calendar" in heard
    name, data = uploads[0]
    assert name == "reply.mp3" and (data[:3] == b"ID3" or data[:2] == b"\xff\xfb")


def test_a_slack_file_over_the_cap_is_refused_before_it_is_fetched(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedSlack() as slack:
        section = {
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
            "maxAttachmentBytes": 10_000,
        }
        _write(isolated_state, model, {"slack": section})
        with _gateway():
            slack.inject_message(
                channel="D0OWNER",
                user=OWNER,
                text="big one",
                channel_type="im",
                file=("big.png", photo(900, 900, "PNG") + b"\0" * 20_000),
            )
            texts = slack.wait_for(lambda: slack.sent_texts(OWNER))
        assert texts[0].startswith("That photo is ") and "larger than the 9 KB" in texts[0]
        assert slack.downloads == [], "never downloaded"
    assert model.requests == []
    assert not (isolated_state / "workspace" / "inbox").exists()
