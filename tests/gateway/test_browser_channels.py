"""The web page's Channels section in real headless Chromium: a Telegram channel (the real
library against the scripted Bot API) shows as connected, an unknown sender's pending pairing
shows with its code, and clicking Approve lets that sender reach the agent.

Needs Debian's `chromium` and `playwright-core` in node_modules, like `test_browser.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts, write_channel_config
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway

pytestmark = [pytest.mark.browser, pytest.mark.integration]

SENDER = 5151


def test_channels_panel_shows_state_and_approves_a_pending_pairing_in_chromium(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    with ScriptedBotAPI() as api:
        write_channel_config(isolated_state, model_server.base_url, api)
        with socket_gateway() as gateway:
            api.inject_text(chat_id=SENDER, sender_id=SENDER, text="hi", sender_name="Pat Doe")
            texts = api.wait_for(lambda: api.sent_texts(SENDER))
            code = texts[0].split("pairing code is ", 1)[1][:8]
            done = run_spec("channels", gateway.url, PAIRING_CODE=code, BOT_NAME=api.username)
            assert_steps_passed(done, 5)
            assert model_server.requests == []

            api.inject_text(chat_id=SENDER, sender_id=SENDER, text="now I may", sender_name="Pat")
            api.wait_for(lambda: len(api.sent_texts(SENDER)) >= 2)
        assert model_user_texts(model_server) == ["now I may"]
