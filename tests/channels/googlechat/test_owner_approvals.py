"""A Google Chat space member asks the app for a shell command and then answers its approval
request herself (`/approve`, `/always`, `/deny`, mentioning the app): against the scripted Chat
service, events signed and posted to a real gateway. Each answer is refused with one line;
nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.googlechat_payloads import SPACE, ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import chat_model
from tests.channels.test_owner_approvals_everywhere import _attack, _command
from tests.channels.webhooks import start_chat

pytestmark = pytest.mark.integration

OWNER = ChatUser("ann")
MEMBER = ChatUser("eve")


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_space_member_cannot_answer_an_approval_request(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    with ScriptedChat() as chat:
        section = {"ownerIds": [OWNER.id], "allowFrom": [OWNER.id], "groups": [SPACE]}
        gateway = start_chat(isolated_state, model, chat, **section)
        try:
            _attack(
                "googlechat",
                lambda text: chat.send(text, user=MEMBER, kind="SPACE", mention=True),
                lambda: chat.texts(SPACE),
                model,
                marker,
                command,
            )
        finally:
            gateway.__exit__(None, None, None)
