"""File tools of a sandboxed session stay inside the workspace: no `..`, no absolute paths out,
no symlinks out, for `read`, `write` and `edit` alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import WorkspaceEscapeError
from nodmix.tools.base import Tool
from nodmix.tools.core import core_tools
from tests.security.conftest import SECRET_KEY, context, make_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools(isolated_state: Path, home: Path) -> dict[str, Tool]:
    sandbox = make_sandbox(isolated_state, home)
    return {t.spec.name: t for t in core_tools(isolation=sandbox)}


def _escapes(workspace: Path, home: Path) -> list[str]:
    (workspace / "link-out").symlink_to(home / ".ssh")
    (workspace / "key-link").symlink_to(home / ".ssh" / "id_ed25519")
    return [
        "../home/.ssh/id_ed25519",
        str(home / ".ssh" / "id_ed25519"),
        "link-out/id_ed25519",
        "key-link",
    ]


async def test_read_in_a_sandboxed_session_refuses_paths_out_of_the_workspace(
    tools: dict[str, Tool], workspace: Path, home: Path
) -> None:
    for path in _escapes(workspace, home):
        with pytest.raises(WorkspaceEscapeError, match="outside the workspace"):
            await tools["read"].call({"path": path}, context(workspace))


async def test_write_and_edit_in_a_sandboxed_session_cannot_change_files_outside(
    tools: dict[str, Tool], workspace: Path, home: Path
) -> None:
    for path in _escapes(workspace, home):
        with pytest.raises(WorkspaceEscapeError):
            await tools["write"].call({"path": path, "content": "pwned"}, context(workspace))
        with pytest.raises(WorkspaceEscapeError):
            await tools["edit"].call(
                {"path": path, "oldText": "sandbox", "newText": "pwned"}, context(workspace)
            )
    assert (home / ".ssh" / "id_ed25519").read_text(encoding="utf-8") == SECRET_KEY


async def test_file_tools_in_a_sandboxed_session_work_inside_the_workspace(
    tools: dict[str, Tool], workspace: Path
) -> None:
    ctx = context(workspace)
    await tools["write"].call({"path": "notes/a.md", "content": "alpha\n"}, ctx)
    await tools["edit"].call({"path": "notes/a.md", "oldText": "alpha", "newText": "beta"}, ctx)
    result = await tools["read"].call({"path": "notes/a.md"}, ctx)
    assert "beta" in result.text_content
