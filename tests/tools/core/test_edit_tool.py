from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.tools.base import ToolContext
from nodmix.tools.core.edit import EditTool

pytestmark = pytest.mark.anyio

SOURCE = """def greet(name):
    message = "hello " + name
    print(message)
    return message


def farewell(name):
    print("bye " + name)
"""


@pytest.fixture
def source(workspace: Path) -> Path:
    path = workspace / "app.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


async def test_unique_match_is_replaced_and_a_diff_is_shown(ctx: ToolContext, source: Path) -> None:
    args = {"path": "app.py", "oldText": "print(message)", "newText": "log(message)"}
    result = await EditTool().call(args, ctx)
    assert source.read_text(encoding="utf-8") == SOURCE.replace("print(message)", "log(message)")
    assert result.text_content.startswith("Edited app.py at line 3.")
    assert "-    print(message)" in result.text_content
    assert "+    log(message)" in result.text_content
    assert result.details["firstChangedLine"] == 3


async def test_new_text_may_be_empty_to_delete(ctx: ToolContext, source: Path) -> None:
    args = {"path": "app.py", "oldText": "    print(message)\n", "newText": ""}
    await EditTool().call(args, ctx)
    assert "print(message)" not in source.read_text(encoding="utf-8")


async def test_no_match_is_an_error_with_the_closest_line(ctx: ToolContext, source: Path) -> None:
    args = {"path": "app.py", "oldText": 'message = "helo " + name', "newText": "x"}
    with pytest.raises(ToolError) as caught:
        await EditTool().call(args, ctx)
    message = str(caught.value)
    assert "not found in app.py" in message
    assert "closest line is 2" in message
    assert source.read_text(encoding="utf-8") == SOURCE


async def test_no_match_due_to_indentation_says_so(ctx: ToolContext, source: Path) -> None:
    args = {"path": "app.py", "oldText": "print(message)\nreturn message", "newText": "x"}
    with pytest.raises(ToolError) as caught:
        await EditTool().call(args, ctx)
    assert "matches at line 3 if indentation" in str(caught.value)


async def test_several_matches_are_an_error_saying_how_many(ctx: ToolContext, source: Path) -> None:
    args = {"path": "app.py", "oldText": "print(", "newText": "log("}
    with pytest.raises(ToolError) as caught:
        await EditTool().call(args, ctx)
    assert "matches 2 places" in str(caught.value)
    assert "more surrounding lines" in str(caught.value)
    assert source.read_text(encoding="utf-8") == SOURCE


async def test_identical_old_and_new_text_is_an_error(ctx: ToolContext, source: Path) -> None:
    with pytest.raises(ToolError):
        await EditTool().call({"path": "app.py", "oldText": "x", "newText": "x"}, ctx)


async def test_crlf_files_match_lf_text_and_keep_crlf(ctx: ToolContext, workspace: Path) -> None:
    path = workspace / "win.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await EditTool().call({"path": "win.txt", "oldText": "one\ntwo", "newText": "1\n2"}, ctx)
    assert path.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_non_utf8_file_is_left_untouched(ctx: ToolContext, workspace: Path) -> None:
    path = workspace / "latin1.txt"
    path.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(ToolError) as caught:
        await EditTool().call({"path": "latin1.txt", "oldText": "au", "newText": "with"}, ctx)
    assert "not valid UTF-8" in str(caught.value)
    assert path.read_bytes() == "caf\xe9 au lait".encode("latin-1")


async def test_missing_file_error_names_it(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as caught:
        await EditTool().call({"path": "ghost.py", "oldText": "a", "newText": "b"}, ctx)
    assert "ghost.py" in str(caught.value)


async def test_edit_outside_the_workspace_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(WorkspaceEscapeError):
        await EditTool().call({"path": "../x.py", "oldText": "a", "newText": "b"}, ctx)


async def test_edit_keeps_file_permissions(ctx: ToolContext, source: Path) -> None:
    source.chmod(0o755)
    await EditTool().call({"path": "app.py", "oldText": "farewell", "newText": "goodbye"}, ctx)
    assert source.stat().st_mode & 0o777 == 0o755


async def test_long_diffs_are_shortened(ctx: ToolContext, workspace: Path) -> None:
    path = workspace / "data.txt"
    path.write_text("start\n" + "a\n" * 100 + "end\n", encoding="utf-8")
    args = {"path": "data.txt", "oldText": "start\n" + "a\n" * 100, "newText": "b\n" * 100}
    result = await EditTool().call(args, ctx)
    assert "more diff lines)" in result.text_content
    assert result.text_content.count("\n") < 60
