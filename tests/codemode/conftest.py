"""Fixtures for the code-mode tests: a running engine, a session manager and a workspace.

The QuickJS-WASI runtime must be installed (`nodmix sandbox install`, done by `make test`);
these tests drive it for real, so a missing runtime is a failure, not a skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager


@pytest.fixture(autouse=True, scope="session")
def _sandbox_runtime_installed() -> None:
    from nodmix.sandbox import status

    report = status()
    if not report.installed:
        pytest.fail(f"the QuickJS-WASI runtime is not installed: {report.hint}")


@pytest.fixture
async def engine() -> AsyncIterator[CodeModeEngine]:
    """A running code-mode engine (its nested calls and parked runs end with the test)."""
    eng = CodeModeEngine()
    async with eng.running():
        yield eng


@pytest.fixture
def sessions(isolated_state: Path) -> Iterator[SessionManager]:
    manager = SessionManager(isolated_state)
    yield manager
    manager.close()


@pytest.fixture
def workspace(isolated_state: Path) -> Path:
    ws = isolated_state / "workspace"
    ws.mkdir()
    (ws / "notes.txt").write_text("The ferry leaves at 9:40.\n", encoding="utf-8")
    return ws
