"""Fixtures of the channel tests: one real Synapse homeserver per test session; a real Prosody
with the bot's account per XMPP test, and the people who talk to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channels.prosody import Prosody, XmppPerson, bot_server
from tests.channels.synapse import Synapse


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
