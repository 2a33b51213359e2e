"""Fixtures for the security tests: a workspace, a home with secrets, the real sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nodmix.origin import TurnOrigin
from nodmix.security.sandbox.policy import SandboxSettings
from nodmix.security.sandbox.session import SessionSandbox
from nodmix.tools.base import ToolContext

SECRET_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- sandbox-test-secret"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory holding an SSH key."""
    path = tmp_path / "home"
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_ed25519").write_text(SECRET_KEY, encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The agent workspace (outside home and state, as the sandbox requires)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def bwrap() -> str:
    """The bubblewrap executable (the Makefile installs it: scripts/ensure-bubblewrap.sh)."""
    path = shutil.which("bwrap")
    assert path, "bubblewrap is missing: run scripts/ensure-bubblewrap.sh"
    return path


def make_sandbox(
    isolated_state: Path, home: Path, bwrap: str | None = None, **settings: object
) -> SessionSandbox:
    """A sandbox in mode `non-main` unless `settings` say otherwise."""
    values: dict[str, object] = {"mode": "non-main", **settings}
    return SessionSandbox(
        SandboxSettings(**values),  # type: ignore[arg-type]
        state_dir=isolated_state,
        home=home,
        bwrap=bwrap,
    )


def context(
    workspace: Path, session: str = "work", agent: str = "main", origin: TurnOrigin | None = None
) -> ToolContext:
    """A tool call in session `agent:<agent>:<session>` (the owner's, unless `origin`)."""
    return ToolContext(
        agent_id=agent,
        session_key=f"agent:{agent}:{session}",
        session_id="s1",
        run_id="r1",
        call_id="call-1",
        workspace=workspace,
        origin=origin,
    )
