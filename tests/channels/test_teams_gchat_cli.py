"""Teams and Google Chat from the command line: `doctor` gets a real token from the scripted
services (and names the fix when it is refused), `channels status` shows them, `message send`
reaches a chat the channel has seen, config mistakes name the key, and a missing extra is one
line with its install command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nodmix.channels.registry import create_adapter
from nodmix.config.loader import load_config
from nodmix.errors import ConfigError
from nodmix.extras import MissingExtraError
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import write_config
from tests.channels.webhooks import start_chat, start_teams
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

ANN_T, ANN_C = TeamsUser("ann"), ChatUser("ann")


def test_doctor_gets_tokens_and_names_the_fix_when_refused(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedTeams() as teams, ScriptedChat() as chat:
        channels = {"msteams": teams.channel_config(), "googlechat": chat.channel_config()}
        write_config(isolated_state, model.base_url, channels)
        doctor = run_nodmix(isolated_state, "doctor")
        assert f"channel msteams: connected as app {teams.app_id}" in doctor.stdout
        assert "channel googlechat: connected as nodmix-app@" in doctor.stdout
        channels["msteams"] = teams.channel_config(appPassword="wrong")
        write_config(isolated_state, model.base_url, channels)
        doctor = run_nodmix(isolated_state, "doctor")
        assert "✗ channel msteams: credentials refused" in doctor.stdout
        assert "Invalid secret" in doctor.stdout and "appPassword" in doctor.stdout


def test_status_and_message_send_reach_chats_the_channels_have_seen(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedTeams() as teams:
        gateway = start_teams(isolated_state, model, teams, allowFrom=[ANN_T.aad])
        try:
            teams.send("hi", user=ANN_T)
            teams.wait_for(lambda: teams.texts(ANN_T.personal_conversation))
            status_file = isolated_state / "channels" / "status.json"
            teams.wait_for(lambda: '"answered": 1' in status_file.read_text())
            shown = run_nodmix(isolated_state, "channels", "status")
        finally:
            gateway.__exit__(None, None, None)
        assert f"msteams: connected as app {teams.app_id}" in shown.stdout
        sent = run_nodmix(
            isolated_state, "message", "send", "--channel", "msteams", "--to", ANN_T.aad, "later"
        )
        assert sent.returncode == 0, sent.stderr
        assert teams.texts(ANN_T.personal_conversation) == ["hi", "later"]
    with ScriptedChat() as chat:
        gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN_C.id])
        try:
            chat.send("hi", user=ANN_C)
            chat.wait_for(lambda: chat.texts(ANN_C.dm_space))
        finally:
            gateway.__exit__(None, None, None)
        sent = run_nodmix(
            isolated_state, "message", "send", "--channel", "googlechat", "--to", ANN_C.id, "hey"
        )
        assert sent.returncode == 0, sent.stderr
        assert chat.texts(ANN_C.dm_space) == ["hi", "hey"]


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"msteams": {"appId": "a", "path": "relative"}}, "channels.msteams.path"),
        ({"googlechat": {"audience": " "}}, "channels.googlechat.audience"),
        (
            {"googlechat": {"audience": "1", "credentials": "{}", "serviceAccountFile": "/k"}},
            "channels.googlechat.credentials",
        ),
        ({"msteams": {"appId": "a", "tenant": "x"}}, "channels.msteams.tenant"),
    ],
)
def test_config_mistakes_name_the_file_and_the_key(
    isolated_state: Path, model: ScriptedModelServer, section: dict[str, object], key: str
) -> None:
    write_config(isolated_state, model.base_url, section)
    done = run_nodmix(isolated_state, "gateway", "--port", "0")
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert key in lines[0] and "nodmix.json" in lines[0]


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"msteams": {"appId": "a"}}, "channels.msteams.appPassword"),
        ({"googlechat": {"audience": "1"}}, "channels.googlechat.serviceAccountFile"),
        (
            {"googlechat": {"audience": "1", "credentials": "not json"}},
            "channels.googlechat.credentials",
        ),
    ],
)
def test_missing_credentials_name_the_key(
    isolated_state: Path, model: ScriptedModelServer, section: dict[str, object], key: str
) -> None:
    write_config(isolated_state, model.base_url, section)
    config = load_config(isolated_state / "nodmix.json").config
    channel = next(iter(section))
    with pytest.raises(ConfigError) as raised:
        create_adapter(channel, config, {}, isolated_state)
    assert raised.value.key == key


@pytest.mark.parametrize(
    ("channel", "library", "name"),
    [("msteams", "jwt", "Microsoft Teams"), ("googlechat", "google.auth", "Google Chat")],
)
def test_a_missing_extra_is_one_line_with_the_install_command(
    isolated_state: Path,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
    channel: str,
    library: str,
    name: str,
) -> None:
    section = {"appId": "a", "appPassword": "p"} if channel == "msteams" else {"audience": "1"}
    section |= {"credentials": json.dumps({"type": "x"})} if channel == "googlechat" else {}
    write_config(isolated_state, model.base_url, {channel: section})
    config = load_config(isolated_state / "nodmix.json").config
    for module in list(sys.modules):
        if module == library or module.startswith((f"{library}.", f"nodmix.channels.{channel}")):
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, library, None)  # as in a core-only install
    with pytest.raises(MissingExtraError) as raised:
        create_adapter(channel, config, {}, isolated_state)
    line = str(raised.value)
    assert line.startswith(f"the {name} channel (channels.{channel}) needs the '{channel}' extra")
    assert line.endswith(f"install 'nodmix[{channel}]'")
    assert "\n" not in line
    assert f"nodmix.channels.{channel}.adapter" not in sys.modules  # refused before importing
