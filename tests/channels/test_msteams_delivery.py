"""What the Teams bot sends: long replies split under Teams' size limit, replies streamed by
updating the activity, a Bot Connector that fails for a while (retried, noticed, recovered),
and files in both directions (its tokens: `test_webhook_tokens.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.channels.chunking import split_text
from nodmix.channels.msteams.mapping import TEXT_LIMIT
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser, file_attachment, inline_image
from nodmix.testing.msteams_server import ScriptedTeams
from nodmix.testing.scripts.echo import respond as echo
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_teams
from tests.media.samples import photo

pytestmark = pytest.mark.integration

ANN = TeamsUser("ann")
DM = ANN.personal_conversation


def _long_reply() -> str:
    words = " ".join(f"word{i:04d}" for i in range(700))  # about 6,300 characters
    code = "".join(f"value_{i:03d} = compute({i})\n" for i in range(300))  # about 7,800
    return f"{words}\n\n```python\n{code}```\n\n{words[:500].upper()}"


def test_a_reply_over_the_limit_arrives_split_and_streamed_by_updates(
    isolated_state: Path, teams: ScriptedTeams
) -> None:
    reply = _long_reply()
    expected = split_text(reply, TEXT_LIMIT)
    assert len(expected) >= 3
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad], streaming="edit")
        try:
            teams.send("write code", user=ANN)
            teams.wait_for(lambda: teams.texts(DM) == expected, timeout=40)
        finally:
            gateway.__exit__(None, None, None)
    sent = teams.messages(DM)
    assert sum(s.edits for s in sent) >= 1, "the first message grew by updates"
    assert len(sent) == len(expected), "nothing sent twice"
    assert all(len(json.dumps({"text": t}).encode()) < 28 * 1024 for t in expected)


def test_a_failing_bot_connector_is_retried_then_noticed_and_recovered_from(
    isolated_state: Path, teams: ScriptedTeams
) -> None:
    with ScriptedModelServer(echo) as model:
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad], typing=False)
        try:
            status = gateway.runtime.channels.statuses["msteams"]
            teams.fail_next(2, 502)
            teams.send("first", user=ANN)
            teams.wait_for(lambda: teams.texts(DM) == ["first"])  # after two retries
            teams.fail_next(3, 503)
            teams.send("lost", user=ANN)
            teams.wait_for(lambda: not status.connected)
            assert "Bot Connector answered HTTP 503" in (status.last_error or "")
            teams.send("third", user=ANN)
            teams.wait_for(lambda: teams.texts(DM) == ["first", "third"])
            assert status.connected
            assert model_user_texts(model) == ["first", "lost", "third"]
        finally:
            gateway.__exit__(None, None, None)


def test_files_and_pasted_images_are_saved_and_a_file_over_the_cap_is_not_kept(
    isolated_state: Path, teams: ScriptedTeams
) -> None:
    teams.files["notes.txt"] = b"ferry at 9:40\n"
    teams.files["pasted"] = photo(64, 48, "PNG")
    teams.files["big.pdf"] = b"%PDF" + b"\0" * 30_000
    with ScriptedModelServer(echo) as model:
        gateway = start_teams(
            isolated_state, model, teams, allowFrom=[ANN.aad], maxAttachmentBytes=20_000
        )
        try:
            note = file_attachment("notes.txt", f"{teams.url}/files/notes.txt")
            pasted = inline_image(f"{teams.service_url}attachments/pasted")
            teams.send("read these", user=ANN, attachments=[note, pasted])
            teams.wait_for(lambda: teams.texts(DM))
            big = file_attachment("big.pdf", f"{teams.url}/files/big.pdf")
            teams.send("and this", user=ANN, attachments=[big])
            teams.wait_for(lambda: len(teams.texts(DM)) == 2)
        finally:
            gateway.__exit__(None, None, None)
    inbox = isolated_state / "workspace" / "inbox"
    saved = sorted(p.name for p in inbox.iterdir())
    assert any(n.endswith("notes.txt") for n in saved) and len(saved) == 2
    assert teams.downloads[:2] == ["notes.txt", "pasted"]
    assert not any("big" in n for n in saved), "abandoned at the cap (Teams declares no size)"
    assert "larger than" in teams.texts(DM)[1]
    assert len(model_user_texts(model)) == 1


def test_the_bots_token_goes_to_no_host_but_the_bot_connectors(
    isolated_state: Path, teams: ScriptedTeams
) -> None:
    with ScriptedTeams() as elsewhere, ScriptedModelServer(echo) as model:
        elsewhere.files["pasted"] = photo(32, 32, "PNG")
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN.aad])
        try:
            pasted = inline_image(f"{elsewhere.service_url}attachments/pasted")
            teams.send("look", user=ANN, attachments=[pasted])
            teams.wait_for(lambda: teams.texts(DM))
        finally:
            gateway.__exit__(None, None, None)
        assert elsewhere.downloads == [] and elsewhere.refused_calls == []
    assert "could not be saved" in model_user_texts(model)[0]
