"""Teams activities with a valid token and a body of the wrong shape (what a replayed token
with a body of one's own, or a broken proxy, would post): each is answered 400 or taken as no
message, never a 500 with a traceback, and the next real message is answered."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_teams

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")


def _mangled(teams: ScriptedTeams) -> list[Any]:
    def activity(**fields: Any) -> dict[str, Any]:
        base = copy.deepcopy(teams.activity("junk", user=ANN, kind="groupChat", mention=True))
        return base | fields

    mention = {"type": "mention", "text": "<at>Nodmix</at>"}
    return [
        [1, 2, 3],
        "just a string",
        activity(entities=[mention | {"mentioned": "x"}]),
        activity(entities=[mention | {"mentioned": {"id": {"x": 1}}, "text": 5}]),
        activity(entities=[{"type": "mention", "mentioned": None}]),
        activity(channelData="x"),
        activity(channelData={"tenant": "x", "channel": 5}),
        activity(attachments=[{"contentType": 5, "content": "x"}]),
        activity(
            attachments=[
                {
                    "contentType": "application/vnd.microsoft.teams.file.download.info",
                    "content": {"downloadUrl": 5, "fileType": []},
                }
            ]
        ),
        activity(conversation={"id": 5, "conversationType": []}),
        activity(text={"a": 1}),
    ]


def test_activities_of_the_wrong_shape_never_fail_the_endpoint(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedTeams() as teams:
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
        try:
            answers = [teams.post(body) for body in _mangled(teams)]  # type: ignore[arg-type]
            assert all(code in (200, 400) for code in answers), answers
            teams.send("the real one", user=ANN)
            teams.wait_for(lambda: teams.texts(ANN.personal_conversation))
            assert model_user_texts(model) == ["the real one"]
        finally:
            gateway.__exit__(None, None, None)
