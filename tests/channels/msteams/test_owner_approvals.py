"""A Teams group-chat member asks the agent for a shell command and then answers its approval
request herself (`/approve`, `/always`, `/deny`, with the bot mentioned): against the scripted
Bot Connector, activities signed and posted to a real gateway. Each answer is refused with one
line; nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import GROUP_CHAT, TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import chat_model
from tests.channels.test_owner_approvals_everywhere import _attack, _command
from tests.channels.webhooks import start_teams

pytestmark = pytest.mark.integration

OWNER = TeamsUser("ann")
MEMBER = TeamsUser("eve")


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_group_chat_member_cannot_answer_an_approval_request(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    with ScriptedTeams() as teams:
        section = {"ownerIds": [OWNER.aad], "allowFrom": [OWNER.aad], "groups": [GROUP_CHAT]}
        gateway = start_teams(isolated_state, model, teams, **section)
        try:
            _attack(
                "msteams",
                lambda text: teams.send(text, user=MEMBER, kind="groupChat", mention=True),
                lambda: teams.texts(GROUP_CHAT),
                model,
                marker,
                command,
            )
        finally:
            gateway.__exit__(None, None, None)
