"""Exec approvals on a channel: a chat's turn that wants the shell asks that chat, and
`/approve <id>` or `/deny <id>` there answers (python-telegram-bot against the scripted Bot
API, a real gateway, a real scripted model server)."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import ToolResultMessage
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import write_channel_config

pytestmark = pytest.mark.integration

FRIEND = 5151


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(tool_then_answer) as server:
        yield server


def _request_id(text: str) -> str:
    found = re.search(r"/approve (\S+)", text)
    assert found, text
    return found.group(1)


def _tool_results(model: ScriptedModelServer) -> list[str]:
    return [
        m.text
        for r in model.requests
        for m in r.request.messages
        if isinstance(m, ToolResultMessage)
    ]


def test_a_chat_approves_a_shell_command_in_the_chat_and_denies_another(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    # FRIEND is the owner: only owners answer approval requests.
    write_channel_config(
        isolated_state, model.base_url, api, {"allowFrom": [FRIEND], "ownerIds": [FRIEND]}
    )
    settings = GatewaySettings(port=0, token=None)
    with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)):
        api.inject_text(chat_id=FRIEND, sender_id=FRIEND, text="use exec hostname")
        asked = api.wait_for(
            lambda: [t for t in api.sent_texts(FRIEND) if "/approve" in t], timeout=30
        )
        assert "hostname" in asked[0] and "needs your approval" in asked[0]
        assert not _tool_results(model), "nothing ran before the answer"
        api.inject_text(chat_id=FRIEND, sender_id=FRIEND, text=f"/approve {_request_id(asked[0])}")
        api.wait_for(
            lambda: any(t.startswith("Approved: hostname") for t in api.sent_texts(FRIEND))
        )
        ran = api.wait_for(lambda: _tool_results(model), timeout=30)
        assert socket.gethostname() in ran[0]

        api.inject_text(chat_id=FRIEND, sender_id=FRIEND, text="use exec whoami")
        second = api.wait_for(
            lambda: [t for t in api.sent_texts(FRIEND) if "/approve" in t and "whoami" in t],
            timeout=30,
        )
        api.inject_text(chat_id=FRIEND, sender_id=FRIEND, text=f"/deny {_request_id(second[0])}")
        refusals = api.wait_for(
            lambda: [t for t in _tool_results(model) if "denied" in t.lower()], timeout=30
        )
        assert refusals[0].startswith("Not run"), refusals[0]
        assert api.wait_for(
            lambda: any(t.startswith("Denied: whoami") for t in api.sent_texts(FRIEND))
        )
