"""Microsoft Teams through a real gateway: the scripted Teams service signs activities like the
Bot Connector and posts them to the gateway's messaging endpoint; the adapter answers with the
Agents SDK's `ConnectorClient` against the same service."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import CHANNEL, GROUP_CHAT, TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_teams

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")
EVE = TeamsUser("eve")


def test_a_stranger_gets_a_pairing_code_and_an_approved_sender_a_reply(
    isolated_state: Path, teams: ScriptedTeams, model: ScriptedModelServer
) -> None:
    gateway = start_teams(isolated_state, model, teams)
    try:
        teams.send("secret plans", user=ANN)
        texts = teams.wait_for(lambda: teams.texts(ANN.personal_conversation))
        assert "pairing code is" in texts[0] and model.requests == []
        code = texts[0].split("pairing code is ", 1)[1][:8]
        PairingStore(isolated_state).approve("msteams", code)

        activity = teams.send("hello agent", user=ANN)
        teams.wait_for(lambda: "hello agent" in teams.texts(ANN.personal_conversation))
        assert model_user_texts(model) == ["hello agent"]
        assert teams.typing_count(ANN.personal_conversation) >= 1
        assert teams.post(activity) == 200  # Teams posting it again: answered once
        teams.send("second", user=ANN)
        teams.wait_for(lambda: "second" in teams.texts(ANN.personal_conversation))
        assert teams.texts(ANN.personal_conversation)[1:] == ["hello agent", "second"]
        status = gateway.runtime.channels.statuses["msteams"]
        assert status.connected and status.account == f"app {teams.app_id}"
    finally:
        gateway.__exit__(None, None, None)


def test_channels_answer_only_when_the_bot_is_mentioned_in_a_thread(
    isolated_state: Path, teams: ScriptedTeams, model: ScriptedModelServer
) -> None:
    gateway = start_teams(
        isolated_state,
        model,
        teams,
        allowFrom=[ANN.aad, EVE.aad],
        groups=[CHANNEL, GROUP_CHAT],
    )
    try:
        teams.send("no mention here", user=ANN, kind="channel")
        teams.send(f"<at>{teams.bot_name}</at> typed, not a mention", user=EVE, kind="channel")
        teams.send("@Nodmix also not one", user=EVE, kind="groupChat")
        root = teams.send("what is new?", user=ANN, kind="channel", mention=True)
        thread = f"{CHANNEL};messageid={root['id']}"
        teams.wait_for(lambda: teams.texts(thread))
        assert teams.texts(thread) == ["[Ann] what is new?"]
        teams.send("and in the group?", user=EVE, kind="groupChat", mention=True)
        teams.wait_for(lambda: teams.texts(GROUP_CHAT))
        assert model_user_texts(model) == ["[Ann] what is new?", "[Eve] and in the group?"]
        status = gateway.runtime.channels.statuses["msteams"]
        assert status.reasons.get("not mentioned") == 3
    finally:
        gateway.__exit__(None, None, None)
