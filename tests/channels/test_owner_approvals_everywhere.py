"""A group member answering an exec approval request with `/approve`, on every channel the tests
can drive besides Telegram (`test_shared_chats.py`): Discord and Slack through their real client
libraries against the scripted servers, IRC against a real ngircd, Matrix against a real
Synapse, email against a real dovecot (where every sender is a DM), Teams, Google Chat and
WhatsApp with activities, events and webhooks signed by their scripted services and posted to
the gateway's port, Signal and Mattermost against their scripted servers, XMPP against a real
Prosody. The
request is posted in the room, the member's answer is refused with one line, and the command
never runs; then the owner's `/approve` in the same room runs it."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import ToolResultMessage
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.googlechat_payloads import SPACE as CHAT_SPACE
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import GROUP_CHAT as TEAMS_GROUP
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from nodmix.testing.slack_server import ScriptedSlack
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.irc_daemon import IrcUser, Ngircd
from tests.channels.mail_daemons import PASSWORD, USER, Dovecot, SmtpRecorder
from tests.channels.prosody import MUC, Prosody, XmppPerson
from tests.channels.support import chat_model, write_config
from tests.channels.synapse import Synapse

pytestmark = pytest.mark.integration

REFUSAL = "Only the owner can answer approval requests (channels.{channel}.ownerIds)."


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0), retry=RetryPolicy(attempts=1))


def _command(state: Path) -> tuple[str, Path]:
    (state / "workspace").mkdir(exist_ok=True)
    marker = state / "workspace" / "ran"
    text = "call exec " + json.dumps({"command": f"touch {marker}"})
    return text, marker


def _wait(check: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    import time

    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def _attack(
    channel: str,
    say: Callable[[str], object],
    texts: Callable[[], list[str]],
    model: ScriptedModelServer,
    marker: Path,
    command: str,
) -> None:
    """The member asks for the command, then answers its request three ways."""
    say(command)
    asked = _wait(lambda: [t for t in texts() if "/approve " in t], "the approval request")
    assert isinstance(asked, list)
    request_id = re.search(r"/approve (\S+)", asked[0]).group(1)  # type: ignore[union-attr]
    for answer in ("/approve", "/always", "/deny"):
        say(f"{answer} {request_id}")
    refusal = REFUSAL.format(channel=channel)
    _wait(lambda: [t for t in texts() if refusal in t][2:], "three refusals")
    assert not marker.exists()
    assert not [m for r in model.requests for m in r.request.messages if _result(m)]


def _result(message: object) -> bool:
    return isinstance(message, ToolResultMessage)


def _owner_approves(
    say: Callable[[str], object], texts: Callable[[], list[str]], marker: Path
) -> None:
    """After the member was refused, the owner answers the same request in the same room."""
    asked = [t for t in texts() if "/approve " in t]
    request_id = re.search(r"/approve (\S+)", asked[0]).group(1)  # type: ignore[union-attr]
    say(f"/approve {request_id}")
    _wait(marker.exists, "the command the owner approved")


def test_discord(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    with ScriptedDiscord() as discord:
        room = discord.channel_ids[0]
        section = {"token": discord.token, "apiBaseUrl": discord.api_url, "groups": [room]}
        section |= {"ownerIds": ["4242"], "requireMention": False}
        write_config(isolated_state, model.base_url, {"discord": section})
        with _gateway():
            _attack(
                "discord",
                lambda text: discord.inject_guild(channel_id=room, sender_id="7", text=text),
                lambda: discord.sent_texts(room),
                model,
                marker,
                command,
            )


def test_slack(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    with ScriptedSlack() as slack:
        tokens = {"botToken": slack.bot_token, "appToken": slack.app_token}
        section = {**tokens, "apiBaseUrl": slack.api_url, "groups": ["C0ROOM"]}
        section |= {"ownerIds": ["U0OWNER"], "requireMention": False}
        write_config(isolated_state, model.base_url, {"slack": section})
        with _gateway():
            _attack(
                "slack",
                lambda text: slack.inject_message(channel="C0ROOM", user="U7", text=text),
                lambda: slack.sent_texts("C0ROOM"),
                model,
                marker,
                command,
            )


def test_irc(isolated_state: Path, model: ScriptedModelServer, tmp_path: Path) -> None:
    command, marker = _command(isolated_state)
    ircd = Ngircd(tmp_path)
    ircd.start()
    member = None
    try:
        section = {"host": "127.0.0.1", "port": ircd.port, "tls": False, "nick": "nodbot"}
        section |= {"channels": ["#lounge"], "lineDelaySeconds": 0.05, "requireMention": False}
        section |= {"ownerIds": ["ann"]}
        write_config(isolated_state, model.base_url, {"irc": section})
        with _gateway() as gateway:
            _wait(lambda: gateway.runtime.channels.statuses["irc"].connected, "connected")
            member = IrcUser(ircd.port, "mallory")
            member.join("#lounge")
            _wait(
                lambda: any(" JOIN " in line and "nodbot" in line for line in member.lines),
                "the bot in the room",
            )
            _attack(
                "irc",
                lambda text: member.say("#lounge", text),  # type: ignore[union-attr]
                lambda: member.received(target="#lounge", sender="nodbot"),  # type: ignore[union-attr]
                model,
                marker,
                command,
            )
    finally:
        if member is not None:
            member.close()
        ircd.stop()


def test_matrix(isolated_state: Path, model: ScriptedModelServer, synapse: Synapse) -> None:
    command, marker = _command(isolated_state)
    names = [f"{role}{uuid.uuid4().hex[:8]}" for role in ("bot", "owner", "member")]
    bot, owner, member = (synapse.register(name) for name in names)
    room = owner.create_room([member.user_id])
    member.join(room)
    section = {"homeserver": synapse.url, "userId": bot.user_id, "accessToken": bot.token}
    section |= {"ownerIds": [owner.user_id], "groups": [room], "requireMention": False}
    write_config(isolated_state, model.base_url, {"matrix": section})
    with _gateway():
        owner.invite(room, bot.user_id)
        _wait(lambda: owner.members(room).get(bot.user_id) == "join", "the bot in the room")
        _attack(
            "matrix",
            lambda text: member.say(room, text),
            lambda: member.texts(room, bot.user_id),
            model,
            marker,
            command,
        )


def _mail(sender: str, subject: str, text: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = USER
    mail["Subject"] = subject
    mail["Message-ID"] = make_msgid(domain="example.org")
    mail.set_content(text)
    return mail


def test_email(isolated_state: Path, model: ScriptedModelServer) -> None:
    """Every sender is a DM on email: an allowed sender who is not the owner cannot approve
    the command their own mail asked for; the owner can, also from a fresh mail whose subject
    says something else."""
    command, marker = _command(isolated_state)
    owner, other = "ann@example.org", "bob@example.org"
    imap = Dovecot()
    imap.start()
    try:
        with SmtpRecorder() as smtp:
            section = {
                "address": USER,
                "imap": {"host": "127.0.0.1", "port": imap.port, "tls": False},
                "smtp": {"host": "127.0.0.1", "port": smtp.port, "security": "none"},
                "dmPolicy": "allowlist",
                "allowFrom": ["*@example.org"],
                "ownerIds": [owner],
                "replyLimit": {"count": 50},
            }
            section["imap"] |= {"password": PASSWORD}
            section["smtp"] |= {"username": ""}
            write_config(isolated_state, model.base_url, {"email": section})
            with _gateway() as gateway:
                _wait(lambda: gateway.runtime.channels.statuses["email"].connected, "connected")
                imap.deliver(_mail(owner, "Hello", "hello"))  # the owner's DM is known
                _wait(lambda: smtp.texts(owner), "the answer to the owner")
                _attack(
                    "email",
                    lambda text: imap.deliver(_mail(other, "Re: Job", text)),
                    lambda: smtp.texts(other),
                    model,
                    marker,
                    command,
                )
                asked = [t for t in smtp.texts(owner) if "/approve " in t]
                assert asked and "needs your approval" in asked[0]
                request_id = re.search(r"/approve (\S+)", asked[0]).group(1)  # type: ignore[union-attr]
                imap.deliver(_mail(owner, "Go ahead", f"/approve {request_id}"))
                _wait(marker.exists, "the command the owner approved")
    finally:
        imap.close()
    log = (isolated_state / "logs" / "nodmix.log").read_text(encoding="utf-8")
    assert f"/approve from {other} in {other} refused: not the owner" in log


def test_msteams(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    owner, member = TeamsUser("ann"), TeamsUser("eve")
    with ScriptedTeams() as teams:
        section = {"ownerIds": [owner.aad], "allowFrom": [owner.aad], "groups": [TEAMS_GROUP]}
        write_config(isolated_state, model.base_url, {"msteams": teams.channel_config(**section)})
        with _gateway() as gateway:
            teams.endpoint = gateway.url + "/channels/msteams/messages"
            _wait(lambda: _connected(gateway, "msteams"), "connected")

            def say(user: TeamsUser) -> Callable[[str], object]:
                return lambda text: teams.send(text, user=user, kind="groupChat", mention=True)

            texts = lambda: teams.texts(TEAMS_GROUP)  # noqa: E731
            _attack("msteams", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)


def test_googlechat(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    owner, member = ChatUser("ann"), ChatUser("eve")
    with ScriptedChat() as chat:
        section = {"ownerIds": [owner.id], "allowFrom": [owner.id], "groups": [CHAT_SPACE]}
        write_config(isolated_state, model.base_url, {"googlechat": chat.channel_config(**section)})
        with _gateway() as gateway:
            chat.endpoint = gateway.url + "/channels/googlechat/events"
            _wait(lambda: _connected(gateway, "googlechat"), "connected")

            def say(user: ChatUser) -> Callable[[str], object]:
                return lambda text: chat.send(text, user=user, kind="SPACE", mention=True)

            texts = lambda: chat.texts(CHAT_SPACE)  # noqa: E731
            _attack("googlechat", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)


def test_whatsapp(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    owner, member, group = "15550104242", "15550109999", "Y2FwaV9ncm91cDoxNTU1MDEwMDAwMDoxMjM"
    with ScriptedWhatsApp() as wa:
        section = wa.config(allowFrom=[owner], ownerIds=[owner], groups=[group])
        write_config(isolated_state, model.base_url, {"whatsapp": section})
        with _gateway() as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"

            def say(sender: str) -> Callable[[str], object]:
                return lambda text: wa.inject_text(sender, text, group_id=group, mention=True)

            texts = lambda: wa.sent_texts(group)  # noqa: E731
            _attack("whatsapp", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)


def test_signal(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    owner, member = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c", "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
    group = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="
    with ScriptedSignalDaemon() as daemon:
        section = daemon.config(allowFrom=[owner], ownerIds=[owner], groups=[group])
        write_config(isolated_state, model.base_url, {"signal": section})
        with _gateway() as gateway:
            _wait(lambda: _connected(gateway, "signal"), "connected")

            def say(sender: str) -> Callable[[str], object]:
                return lambda text: daemon.inject_text(sender, text, group_id=group, mention=True)

            texts = lambda: daemon.sent_texts(group)  # noqa: E731
            _attack("signal", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)


def test_mattermost(isolated_state: Path, model: ScriptedModelServer) -> None:
    command, marker = _command(isolated_state)
    owner, member, town = ("ann" + "0" * 23, "eve" + "0" * 23, "town" + "0" * 22)
    with ScriptedMattermost() as mm:
        mm.add_user(owner, "ann")
        mm.add_user(member, "eve")
        section = {"url": mm.url, "token": mm.token, "typing": False}
        section |= {"ownerIds": [owner], "allowFrom": [owner], "groups": [town]}
        write_config(isolated_state, model.base_url, {"mattermost": section})
        with _gateway() as gateway:
            _wait(lambda: _connected(gateway, "mattermost"), "connected")

            def say(sender: str) -> Callable[[str], object]:
                return lambda text: mm.inject_post(town, sender, f"@nodbot {text}")

            texts = lambda: mm.texts(town)  # noqa: E731
            _attack("mattermost", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)


def test_xmpp(isolated_state: Path, model: ScriptedModelServer, tmp_path: Path) -> None:
    command, marker = _command(isolated_state)
    prosody = Prosody(tmp_path / "prosody")
    prosody.register("nodbot", "bot-secret")
    prosody.start()
    room = f"lounge@{MUC}"
    people: list[XmppPerson] = []
    try:
        section = {"jid": "nodbot@localhost", "password": "bot-secret", "server": "127.0.0.1"}
        section |= {"port": prosody.port, "tls": "off", "rooms": [room], "typing": False}
        section |= {"ownerIds": ["ann@localhost"], "allowFrom": ["ann@localhost"]}
        write_config(isolated_state, model.base_url, {"xmpp": section})
        with _gateway() as gateway:
            _wait(lambda: _connected(gateway, "xmpp"), "connected")
            for name in ("ann", "eve"):
                person = XmppPerson(prosody, name)
                people.append(person)
                person.join(room)
            owner, member = people

            def say(person: XmppPerson) -> Callable[[str], object]:
                return lambda text: person.say(room, f"nodbot: {text}", room=True)

            texts = lambda: member.texts(f"{room}/nodbot")  # noqa: E731
            _attack("xmpp", say(member), texts, model, marker, command)
            _owner_approves(say(owner), texts, marker)
    finally:
        for person in people:
            person.close()
        prosody.stop()


def _connected(gateway: BackgroundGateway, channel: str) -> bool:
    status = gateway.runtime.channels.statuses.get(channel)
    return status is not None and status.connected
