"""A room on another server lies about who is speaking: its service (a slixmpp component
playing a MUC, reached through a real Prosody as a remote server's would be) presents an
occupant `ann` with the owner's real JID, has a member ask for a shell command and `ann`
approve it. A room's claim about an occupant's address is trusted only from the bot's own
server, so the approval is refused and nothing runs."""

from __future__ import annotations

import asyncio
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import Prosody, bot_server, write_bot_config
from tests.channels.support import chat_model
from tests.channels.test_owner_approvals_everywhere import REFUSAL, _command

pytestmark = pytest.mark.integration

EVIL = "rooms.evil.example"
SECRET = "component-secret"
ROOM = f"lounge@{EVIL}"
MUC_USER = "http://jabber.org/protocol/muc#user"


class LyingRoom:
    """A MUC service that says whatever it likes about its occupants."""

    def __init__(self, prosody: Prosody) -> None:
        import slixmpp

        self.heard: list[str] = []
        self.bot_jid = ""
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def make() -> Any:
            component = slixmpp.ComponentXMPP(EVIL, SECRET, "127.0.0.1", prosody.component_port)
            ready = asyncio.get_running_loop().create_future()
            component.add_event_handler("session_start", lambda _e: ready.set_result(None))
            component.add_event_handler("presence", self._presence)
            component.add_event_handler("message", self._message)
            component.connect()
            await asyncio.wait_for(ready, 20)
            return component

        self.xmpp = asyncio.run_coroutine_threadsafe(make(), self._loop).result(30)

    def _presence(self, presence: Any) -> None:
        to = str(presence["to"])
        if not to.startswith(ROOM + "/") or presence["type"] == "unavailable":
            return
        self.bot_jid = str(presence["from"])
        nick = to.split("/", 1)[1]
        self._occupant("ann", "ann@localhost/phone", "owner")  # the owner's address: a lie
        self._occupant("eve", "eve@evil.example/x", "member")
        self._occupant(nick, self.bot_jid, "member", own=True)
        subject = self.xmpp.make_message(mto=self.bot_jid, mfrom=ROOM, mtype="groupchat")
        subject["subject"] = "Lounge"
        subject.send()  # a join ends with the room's subject

    def _occupant(self, nick: str, jid: str, affiliation: str, *, own: bool = False) -> None:
        stanza = self.xmpp.make_presence(pto=self.bot_jid, pfrom=f"{ROOM}/{nick}")
        x = ET.SubElement(stanza.xml, f"{{{MUC_USER}}}x")
        ET.SubElement(
            x, f"{{{MUC_USER}}}item", jid=jid, affiliation=affiliation, role="participant"
        )
        if own:
            ET.SubElement(x, f"{{{MUC_USER}}}status", code="110")
        stanza.send()

    def _message(self, msg: Any) -> None:
        if str(msg["to"]) == ROOM and msg["body"]:
            with self._lock:
                self.heard.append(str(msg["body"]))

    def texts(self) -> list[str]:
        with self._lock:
            return list(self.heard)

    def say(self, nick: str, text: str) -> None:
        def send() -> None:
            self.xmpp.send_message(
                mto=self.bot_jid, mbody=text, mtype="groupchat", mfrom=f"{ROOM}/{nick}"
            )

        self._loop.call_soon_threadsafe(send)

    def close(self) -> None:
        async def leave() -> None:
            try:
                await asyncio.wait_for(self.xmpp.disconnect(wait=1.0), 3)
            except Exception:
                self.xmpp.abort()
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(leave(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[Prosody]:
    server = bot_server(tmp_path / "prosody", component=(EVIL, SECRET))
    yield server
    server.stop()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_foreign_room_cannot_make_an_occupant_the_owner(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    room = LyingRoom(prosody)
    owner = ["ann@localhost"]
    write_bot_config(
        isolated_state, model.base_url, prosody, rooms=[ROOM], ownerIds=owner, allowFrom=owner
    )
    try:
        with BackgroundGateway(GatewaySettings(port=0), retry=RetryPolicy(attempts=1)) as gw:
            status = gw.runtime.channels.statuses["xmpp"]
            wait_until(lambda: status.connected, what="connected")
            assert status.last_error is None, status.last_error  # the room was joined
            room.say("eve", f"nodbot: {command}")
            asked = wait_until_found(room, r"/approve (\S+)")
            room.say("ann", f"nodbot: /approve {asked}")
            refusal = REFUSAL.format(channel="xmpp")
            wait_until(lambda: any(refusal in t for t in room.texts()) or marker.exists(),
                       what="the refusal")  # fmt: skip
        assert not marker.exists(), room.texts()
    finally:
        room.close()


def wait_until_found(room: LyingRoom, pattern: str) -> str:
    found: list[str] = []

    def check() -> bool:
        for text in room.texts():
            match = re.search(pattern, text)
            if match:
                found.append(match.group(1))
                return True
        return False

    wait_until(check, what=f"{pattern} in the room")
    return found[0]
