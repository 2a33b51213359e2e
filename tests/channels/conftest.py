"""Fixtures of the channel tests: one real Synapse homeserver per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
