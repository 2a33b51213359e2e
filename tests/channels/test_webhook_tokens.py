"""The token a Teams bot and a Google Chat app get for themselves, against each scripted
platform: a token the platform revokes is fetched anew and the reply still arrives, and a token
endpoint that is down at start is retried until it answers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import write_config
from tests.channels.webhooks import start_chat, start_teams

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Platform:
    """One scripted platform, the channel that talks to it and the person who writes."""

    channel: str
    server: Any  # ScriptedTeams | ScriptedChat: the same calls, typed per platform
    start: Callable[..., BackgroundGateway]
    user: Any
    sender_id: str
    """What `allowFrom` lists for `user`."""
    dm: str
    section: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(params=["msteams", "googlechat"])
def platform(request: pytest.FixtureRequest) -> Iterator[Platform]:
    if request.param == "msteams":
        teams_user = TeamsUser("ann")
        with ScriptedTeams() as teams:
            yield Platform(
                "msteams",
                teams,
                start_teams,
                teams_user,
                teams_user.aad,
                teams_user.personal_conversation,
                {"typing": False},
            )
    else:
        chat_user = ChatUser("ann")
        with ScriptedChat() as chat:
            yield Platform(
                "googlechat", chat, start_chat, chat_user, chat_user.id, chat_user.dm_space
            )


def test_a_revoked_token_is_renewed_and_the_reply_still_arrives(
    isolated_state: Path, model: ScriptedModelServer, platform: Platform
) -> None:
    server, dm = platform.server, platform.dm
    gateway = platform.start(
        isolated_state, model, server, allowFrom=[platform.sender_id], **platform.section
    )
    try:
        server.send("first", user=platform.user)
        server.wait_for(lambda: server.texts(dm) == ["first"])
        revoked = server.revoke_tokens()
        server.send("second", user=platform.user)
        server.wait_for(lambda: server.texts(dm) == ["first", "second"])
        assert server.tokens and not server.tokens & revoked, "a new token was fetched"
        assert [code for _, code in server.refused_calls] == [401]
        assert gateway.runtime.channels.statuses[platform.channel].connected
    finally:
        gateway.__exit__(None, None, None)


def test_a_token_endpoint_down_at_start_is_retried_until_it_answers(
    isolated_state: Path, model: ScriptedModelServer, platform: Platform
) -> None:
    server, channel = platform.server, platform.channel
    server.token_endpoint.mode = "down"
    write_config(isolated_state, model.base_url, {channel: server.channel_config()})
    with BackgroundGateway(GatewaySettings(port=0, token=None)) as gateway:
        status = gateway.runtime.channels.statuses
        server.wait_for(lambda: channel in status and status[channel].errors >= 1)
        assert not status[channel].connected
        server.token_endpoint.mode = "up"
        server.wait_for(lambda: status[channel].connected, timeout=30)
