"""Fixtures of the state backend tests: one factory of "processes" per backend, so a contract
test runs against files and against a real PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodmix.sessions.manager import SessionManager
from nodmix.state.backend import FileState, StateBackend
from nodmix.state.settings import StateSettings

Opener = Callable[[], StateBackend]


def pg_settings(url: str, **more: object) -> StateSettings:
    """Settings of the postgres backend on `url`."""
    return StateSettings(backend="postgres", url=url, **more)  # type: ignore[arg-type]


@pytest.fixture(params=["files", "postgres"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    """Each contract test runs once per backend."""
    return str(request.param)


@pytest.fixture
def open_backend(
    backend_kind: str, isolated_state: Path, request: pytest.FixtureRequest
) -> Iterator[Opener]:
    """Opens the backend as a new process would (for postgres: its own pool and locks)."""
    opened: list[StateBackend] = []
    url = request.getfixturevalue("postgres_url") if backend_kind == "postgres" else ""

    def make() -> StateBackend:
        if backend_kind == "files":
            backend: StateBackend = FileState(isolated_state)
        else:
            from nodmix.state.postgres.backend import PostgresState

            backend = PostgresState.open(pg_settings(url), isolated_state, role="test")
        opened.append(backend)
        return backend

    yield make
    for backend in reversed(opened):
        backend.close()


@pytest.fixture
def managers(open_backend: Opener, isolated_state: Path) -> Callable[..., SessionManager]:
    """A session manager in a new "process" of the backend under test."""

    def make(**kwargs: object) -> SessionManager:
        backend = open_backend()
        return SessionManager(isolated_state, backend=backend.sessions(), **kwargs)  # type: ignore[arg-type]

    return make
