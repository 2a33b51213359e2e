"""An XMPP room occupant takes the owner's nick and answers the approval request for a shell
command she asked for (`/approve`, `/always`, `/deny`, addressed to the bot): against a real
Prosody and a real gateway. The room shows the bot her real JID, so the nick names nobody;
each answer is refused with one line and nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import MUC, Prosody, XmppPerson, bot_server, write_bot_config
from tests.channels.support import chat_model
from tests.channels.test_owner_approvals_everywhere import _attack, _command

pytestmark = pytest.mark.integration

ROOM = f"lounge@{MUC}"


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[Prosody]:
    server = bot_server(tmp_path / "prosody", ("ann", "pw"))
    yield server
    server.stop()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_the_owners_nick_in_a_room_does_not_answer_approval_requests(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    command, marker = _command(isolated_state)
    owner = ["ann@localhost"]
    write_bot_config(
        isolated_state, model.base_url, prosody, rooms=[ROOM], ownerIds=owner, allowFrom=owner
    )
    eve = people["eve"] = XmppPerson(prosody, "eve")
    eve.nick = "ann"  # the owner's nick (the owner is not in the room)
    with BackgroundGateway(GatewaySettings(port=0), retry=RetryPolicy(attempts=1)) as gateway:
        wait_until(lambda: gateway.runtime.channels.statuses["xmpp"].connected, what="up")
        eve.join(ROOM)
        _attack(
            "xmpp",
            lambda text: eve.say(ROOM, f"nodbot: {text}", room=True),
            lambda: eve.texts(f"{ROOM}/nodbot"),
            model,
            marker,
            command,
        )
