"""Fixtures shared by the whole suite.

Every test runs with its own state directory and config path, so nothing touches `~/.nodmix`.
The sandbox runtime cache (`NODMIX_CACHE_DIR` / the user cache dir) is shared on purpose: it holds
the hash-verified `quickjs.wasm` that `make test` installs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the gateway's loop)."""
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh `NODMIX_STATE_DIR` per test, with the config path inside it."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("NODMIX_STATE_DIR", str(state))
    monkeypatch.setenv("NODMIX_CONFIG_PATH", str(state / "nodmix.json"))
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "NODMIX_GATEWAY_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    yield state


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One real PostgreSQL server per test worker (see `tests/support/postgres.py`)."""
    from tests.support.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_url(postgres_server: object) -> str:
    """A fresh, empty database on the worker's PostgreSQL server."""
    from tests.support.postgres import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    return postgres_server.fresh_database()
