"""A Mattermost channel member asks the bot for a shell command and then answers its approval
request herself (`@nodbot /approve ...`): against the scripted Mattermost server and a real
gateway. Her username is the owner's with different case, which names nobody: Nodmix knows
people by user id. Each answer is refused with one line; nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.support import chat_model, write_config
from tests.channels.test_owner_approvals_everywhere import _attack, _command

pytestmark = pytest.mark.integration

OWNER = "ann00000000000000000000000"
MEMBER = "eve00000000000000000000000"
TOWN = "town0000000000000000000000"


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_channel_member_cannot_answer_an_approval_request(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    with ScriptedMattermost() as mm:
        mm.add_user(OWNER, "ann")
        mm.add_user(MEMBER, "Ann")
        section = {"url": mm.url, "token": mm.token, "typing": False}
        section |= {"ownerIds": [OWNER], "allowFrom": [OWNER, "ann"], "groups": [TOWN]}
        write_config(isolated_state, model.base_url, {"mattermost": section})
        settings = GatewaySettings(port=0, token=None)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
            status = gateway.runtime.channels.statuses["mattermost"]
            wait_until(lambda: status.connected, what="connected")
            _attack(
                "mattermost",
                lambda text: mm.inject_post(TOWN, MEMBER, f"@nodbot {text}"),
                lambda: mm.texts(TOWN),
                model,
                marker,
                command,
            )
