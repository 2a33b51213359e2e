from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.tools.base import ToolContext
from nodmix.tools.core.read import ReadTool

pytestmark = pytest.mark.anyio


def _numbered(path: Path, count: int, width: int = 0) -> None:
    lines = [f"line {n}".ljust(width, ".") for n in range(1, count + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


async def test_small_file_is_returned_exactly_without_a_footer(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n  beta\n", encoding="utf-8")
    result = await ReadTool().call({"path": "a.txt"}, ctx)
    assert not result.is_error
    assert result.text_content == "alpha\n  beta"
    assert result.details == {
        "path": "a.txt",
        "startLine": 1,
        "endLine": 2,
        "totalLines": 2,
        "truncated": False,
    }


async def test_offset_and_limit_select_lines_and_footer_says_where_to_continue(
    ctx: ToolContext, workspace: Path
) -> None:
    _numbered(workspace / "n.txt", 10)
    result = await ReadTool().call({"path": "n.txt", "offset": 3, "limit": 2}, ctx)
    assert result.text_content == "line 3\nline 4\n\n[Lines 3-4 of 10. Use offset=5 to continue.]"


async def test_reading_the_last_page_says_end_of_file(ctx: ToolContext, workspace: Path) -> None:
    _numbered(workspace / "n.txt", 10)
    result = await ReadTool().call({"path": "n.txt", "offset": 9}, ctx)
    assert result.text_content == "line 9\nline 10\n\n[Lines 9-10 of 10. End of file.]"


async def test_line_cap_limits_a_call_even_without_limit(ctx: ToolContext, workspace: Path) -> None:
    _numbered(workspace / "n.txt", 12)
    result = await ReadTool(max_lines=5).call({"path": "n.txt", "limit": 50}, ctx)
    assert result.text_content.endswith("line 5\n\n[Lines 1-5 of 12. Use offset=6 to continue.]")
    assert result.details["truncated"] is True


async def test_byte_cap_stops_at_a_whole_line(ctx: ToolContext, workspace: Path) -> None:
    _numbered(workspace / "n.txt", 20, width=20)  # 21 bytes per line with the newline
    result = await ReadTool(max_bytes=50).call({"path": "n.txt"}, ctx)
    text, footer = result.text_content.split("\n\n")
    assert text.splitlines() == ["line 1".ljust(20, "."), "line 2".ljust(20, ".")]
    assert footer == "[Lines 1-2 of 20 (size cap reached). Use offset=3 to continue.]"


async def test_a_line_longer_than_the_byte_cap_is_cut(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "min.js").write_text("x" * 1000 + "\nnext\n", encoding="utf-8")
    result = await ReadTool(max_bytes=100).call({"path": "min.js"}, ctx)
    text, footer = result.text_content.split("\n\n")
    assert text == "x" * 100
    assert "Line 1 is too long" in footer


async def test_paging_deep_into_a_large_file_returns_the_right_lines(
    ctx: ToolContext, workspace: Path
) -> None:
    _numbered(workspace / "big.txt", 200_000)
    result = await ReadTool().call({"path": "big.txt", "offset": 199_999}, ctx)
    assert result.text_content.startswith("line 199999\nline 200000\n\n")
    assert result.details["totalLines"] == 200_000


async def test_file_without_trailing_newline_keeps_its_last_line(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\ntwo", encoding="utf-8")
    result = await ReadTool().call({"path": "a.txt"}, ctx)
    assert result.text_content == "one\ntwo"


async def test_offset_past_the_end_is_an_error(ctx: ToolContext, workspace: Path) -> None:
    _numbered(workspace / "n.txt", 3)
    with pytest.raises(ToolError) as caught:
        await ReadTool().call({"path": "n.txt", "offset": 4}, ctx)
    assert "3 lines" in str(caught.value)


async def test_empty_file_says_so(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "empty.txt").write_bytes(b"")
    result = await ReadTool().call({"path": "empty.txt"}, ctx)
    assert result.text_content == "(empty.txt is empty)"


async def test_missing_file_error_names_it(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as caught:
        await ReadTool().call({"path": "nope/missing.txt"}, ctx)
    assert "nope/missing.txt" in str(caught.value)


async def test_binary_file_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError) as caught:
        await ReadTool().call({"path": "blob.bin"}, ctx)
    assert "binary" in str(caught.value)


async def test_a_truncated_image_is_an_error_result(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = await ReadTool().call({"path": "img.png"}, ctx)
    assert result.is_error and "img.png: not an image file" in result.text_content


async def test_directory_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "src").mkdir()
    with pytest.raises(ToolError) as caught:
        await ReadTool().call({"path": "src"}, ctx)
    assert "directory" in str(caught.value)


async def test_path_outside_the_workspace_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(WorkspaceEscapeError):
        await ReadTool().call({"path": "../outside.txt"}, ctx)


async def test_invalid_utf8_is_shown_with_replacement_characters(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    result = await ReadTool().call({"path": "latin1.txt"}, ctx)
    assert result.text_content == "caf\ufffd"


async def test_small_files_are_read_on_the_loop_and_large_ones_in_a_worker_thread(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio.to_thread

    from nodmix.tools.core import read as read_module

    hops: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(str(args[-1]))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(read_module.anyio.to_thread, "run_sync", counting)
    (workspace / "small.txt").write_text("tiny\n", encoding="utf-8")
    _numbered(workspace / "large.txt", 20_000)
    assert (workspace / "large.txt").stat().st_size > read_module.INLINE_READ_BYTES
    small = await ReadTool().call({"path": "small.txt"}, ctx)
    large = await ReadTool().call({"path": "large.txt", "offset": 19_999}, ctx)
    missing = ReadTool().call({"path": "nope.txt"}, ctx)
    with pytest.raises(ToolError, match="File not found") as caught:
        await missing
    assert f"looked for {workspace.resolve() / 'nope.txt'}" in str(caught.value)
    assert small.text_content == "tiny"
    assert large.text_content.startswith("line 19999\nline 20000")
    assert hops == ["large.txt"]


async def test_offered_skill_folders_outside_the_workspace_are_readable_by_absolute_path(
    ctx: ToolContext, tmp_path: Path
) -> None:
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("Do the thing.\n", encoding="utf-8")
    (tmp_path / "skills" / "private.txt").write_text("no", encoding="utf-8")
    tool = ReadTool(read_roots=[skill])
    result = await tool.call({"path": str(skill / "SKILL.md")}, ctx)
    assert result.text_content == "Do the thing."
    assert result.details["path"] == str(skill.resolve() / "SKILL.md")
    for path in (str(tmp_path / "skills" / "private.txt"), str(skill / ".." / "private.txt")):
        with pytest.raises(WorkspaceEscapeError):
            await tool.call({"path": path}, ctx)
    with pytest.raises(WorkspaceEscapeError):
        await ReadTool().call({"path": str(skill / "SKILL.md")}, ctx)
