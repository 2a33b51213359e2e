"""Fixtures of the channel tests: one real Synapse homeserver per test session; a real Prosody
with the bot's account per XMPP test, and the people who talk to it; the scripted Teams and
Google Chat services per test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from tests.channels.prosody import Prosody, XmppPerson, bot_server
from tests.channels.synapse import Synapse

if TYPE_CHECKING:
    from nodmix.testing.googlechat_server import ScriptedChat
    from nodmix.testing.model_server import ScriptedModelServer
    from nodmix.testing.msteams_server import ScriptedTeams

S = TypeVar("S", bound=AbstractContextManager[Any])


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """Synapse on 127.0.0.1 with SQLite, started once and stopped at the end of the session."""
    root: Path = tmp_path_factory.mktemp("synapse")
    server = Synapse(root)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[Prosody]:
    """Prosody with the bot's account (`prosody.BOT`), stopped at the end of the test."""
    server = bot_server(tmp_path / "prosody")
    yield server
    server.stop()


@pytest.fixture
def people() -> Iterator[dict[str, XmppPerson]]:
    """XMPP people a test adds by name, disconnected at its end (ask for it after `prosody`,
    so they leave before the server stops; a test may start a server of its own)."""
    users: dict[str, XmppPerson] = {}
    yield users
    for user in users.values():
        user.close()


def _served(server: S) -> Iterator[S]:
    with server:
        yield server


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    """The agent's model: a scripted server that echoes (a module asks for another script by
    defining its own `model`)."""
    from nodmix.testing.model_server import ScriptedModelServer
    from nodmix.testing.scripts.echo import respond as echo

    yield from _served(ScriptedModelServer(echo))


@pytest.fixture
def teams() -> Iterator[ScriptedTeams]:
    """The scripted Teams service (Bot Connector, token endpoint) for one bot."""
    from nodmix.testing.msteams_server import ScriptedTeams

    yield from _served(ScriptedTeams())


@pytest.fixture
def chat() -> Iterator[ScriptedChat]:
    """The scripted Google Chat service (Chat API, token endpoint) for one app."""
    from nodmix.testing.googlechat_server import ScriptedChat

    yield from _served(ScriptedChat())
