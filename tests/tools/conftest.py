"""Fixtures for tool tests: a workspace directory and a `ToolContext` pointing at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.tools.base import ToolContext


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An existing, empty agent workspace (resolved, so comparisons are exact)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    """A context for one tool call in `workspace`."""
    return ToolContext(
        agent_id="main",
        session_key="agent:main:main",
        session_id="s1",
        run_id="r1",
        call_id="call-1",
        workspace=workspace,
    )
