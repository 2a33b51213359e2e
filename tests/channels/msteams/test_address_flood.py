"""A flood of strangers cannot push the owner's conversation address out of the bounded store:
addresses of chats the access check let in are kept apart from strangers', so the owner is
still reachable (`nodmix message send`, replies after a restart) afterwards. The scripted
Teams service posts signed activities to a real gateway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.channels import conversations
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.webhooks import start_teams
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")
KEPT = 4
"""The store's bound in this test (2000 in the product: the same code, fewer messages)."""


def test_strangers_flooding_the_bot_do_not_evict_the_owners_address(
    isolated_state: Path,
    teams: ScriptedTeams,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conversations, "MAX_CHATS", KEPT)
    gateway = start_teams(isolated_state, model, teams, ownerIds=[ANN.aad])
    try:
        teams.send("hello", user=ANN)
        teams.wait_for(lambda: "hello" in teams.texts(ANN.personal_conversation))
        strangers = [TeamsUser(f"stranger{i}") for i in range(KEPT * 3)]
        for user in strangers:
            teams.send("let me in", user=user)
            teams.wait_for(lambda u=user: teams.texts(u.personal_conversation))
        assert all("pairing code is" in teams.texts(u.personal_conversation)[0] for u in strangers)
    finally:
        gateway.__exit__(None, None, None)
    sent = run_nodmix(
        isolated_state, "message", "send", "--channel", "msteams", "--to", ANN.aad, "still here"
    )
    assert sent.returncode == 0, sent.stderr
    assert teams.texts(ANN.personal_conversation)[-1] == "still here"
    # the strangers' part stays bounded: the first ones are forgotten
    stored = json.loads((isolated_state / "channels" / "msteams" / "position.json").read_text())
    assert len(stored["chats"]) == KEPT
    assert strangers[0].aad not in stored["chats"] and strangers[-1].aad in stored["chats"]
