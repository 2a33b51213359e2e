from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.tools.base import ToolContext
from nodmix.tools.core.write import WriteTool

pytestmark = pytest.mark.anyio


async def test_write_creates_parent_directories_and_reports_bytes(
    ctx: ToolContext, workspace: Path
) -> None:
    result = await WriteTool().call({"path": "a/b/c.txt", "content": "héllo\n"}, ctx)
    assert (workspace / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"
    assert result.text_content == "Created a/b/c.txt (7 bytes)."
    assert result.details == {"path": "a/b/c.txt", "bytes": 7, "created": True}


async def test_write_replaces_content_keeping_permissions_and_no_temp_files(
    ctx: ToolContext, workspace: Path
) -> None:
    script = workspace / "run.sh"
    script.write_text("old", encoding="utf-8")
    script.chmod(0o750)
    result = await WriteTool().call({"path": "run.sh", "content": "#!/bin/sh\n"}, ctx)
    assert result.text_content.startswith("Replaced run.sh")
    assert script.read_text(encoding="utf-8") == "#!/bin/sh\n"
    assert script.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in workspace.iterdir()) == ["run.sh"]


async def test_writing_an_empty_file_works(ctx: ToolContext, workspace: Path) -> None:
    await WriteTool().call({"path": "empty", "content": ""}, ctx)
    assert (workspace / "empty").read_bytes() == b""


async def test_writing_over_a_directory_is_an_error(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    with pytest.raises(ToolError) as caught:
        await WriteTool().call({"path": "dir", "content": "x"}, ctx)
    assert "directory" in str(caught.value)


async def test_parent_that_is_a_file_is_an_error(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ToolError) as caught:
        await WriteTool().call({"path": "file/child.txt", "content": "x"}, ctx)
    assert "Cannot write file/child.txt" in str(caught.value)


async def test_write_outside_the_workspace_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceEscapeError):
        await WriteTool().call({"path": str(tmp_path / "escape.txt"), "content": "x"}, ctx)
    assert not (tmp_path / "escape.txt").exists()


async def test_missing_content_is_a_tool_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as caught:
        await WriteTool().call({"path": "a.txt"}, ctx)
    assert "`content`" in str(caught.value)
