"""The web page's Channels section in real headless Chromium: a Telegram channel (the real
library against the scripted Bot API) shows as connected, an unknown sender's pending pairing
shows with its code, and clicking Approve lets that sender reach the agent.

Needs Debian's `chromium` and `playwright-core` in node_modules, like `test_browser.py`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts, write_channel_config
from tests.gateway.support import TOKEN, socket_gateway
from tests.gateway.test_browser import ROOT, _requirements

pytestmark = [pytest.mark.browser, pytest.mark.integration]

SPEC = Path(__file__).parent / "browser" / "channels.spec.mjs"
SENDER = 5151


def test_channels_panel_shows_state_and_approves_a_pending_pairing_in_chromium(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    node, chromium = _requirements()
    with ScriptedBotAPI() as api:
        write_channel_config(isolated_state, model_server.base_url, api)
        with socket_gateway() as gateway:
            api.inject_text(chat_id=SENDER, sender_id=SENDER, text="hi", sender_name="Pat Doe")
            texts = api.wait_for(lambda: api.sent_texts(SENDER))
            code = texts[0].split("pairing code is ", 1)[1][:8]
            done = subprocess.run(
                [node, str(SPEC)],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
                env={
                    **os.environ,
                    "GATEWAY_URL": gateway.url,
                    "GATEWAY_TOKEN": TOKEN,
                    "CHROMIUM_PATH": chromium,
                    "PAIRING_CODE": code,
                    "BOT_NAME": api.username,
                },
                check=False,
            )
            assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
            assert done.stdout.count(" ok\n") == 5, done.stdout
            assert model_server.requests == []

            api.inject_text(chat_id=SENDER, sender_id=SENDER, text="now I may", sender_name="Pat")
            api.wait_for(lambda: len(api.sent_texts(SENDER)) >= 2)
        assert model_user_texts(model_server) == ["now I may"]
