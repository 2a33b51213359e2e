from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.tools.workspace import display_path, resolve_path


def test_relative_path_resolves_inside_the_workspace(workspace: Path) -> None:
    assert resolve_path(workspace, "src/app.py") == workspace / "src" / "app.py"


def test_absolute_path_inside_the_workspace_is_allowed(workspace: Path) -> None:
    inside = workspace / "notes.md"
    assert resolve_path(workspace, str(inside)) == inside


def test_the_workspace_itself_is_allowed(workspace: Path) -> None:
    assert resolve_path(workspace, ".") == workspace


def test_dotdot_that_stays_inside_is_allowed(workspace: Path) -> None:
    assert resolve_path(workspace, "a/../b.txt") == workspace / "b.txt"


def test_dotdot_escape_is_refused_naming_path_and_workspace(workspace: Path) -> None:
    with pytest.raises(WorkspaceEscapeError) as caught:
        resolve_path(workspace, "../secret.txt")
    message = str(caught.value)
    assert "'../secret.txt'" in message
    assert str(workspace) in message


def test_absolute_path_outside_the_workspace_is_refused(workspace: Path) -> None:
    with pytest.raises(WorkspaceEscapeError):
        resolve_path(workspace, "/etc/passwd")


def test_sibling_directory_with_the_workspace_name_as_prefix_is_refused(workspace: Path) -> None:
    sibling = workspace.parent / (workspace.name + "-other")
    sibling.mkdir()
    with pytest.raises(WorkspaceEscapeError):
        resolve_path(workspace, str(sibling / "x"))


def test_symlinked_directory_pointing_outside_is_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    with pytest.raises(WorkspaceEscapeError) as caught:
        resolve_path(workspace, "link/file.txt")
    assert str(outside) in str(caught.value)


def test_symlinked_file_pointing_outside_is_refused(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "secret.txt"
    target.write_text("s", encoding="utf-8")
    (workspace / "innocent.txt").symlink_to(target)
    with pytest.raises(WorkspaceEscapeError):
        resolve_path(workspace, "innocent.txt")


def test_symlink_followed_by_dotdot_is_resolved_before_the_check(
    workspace: Path, tmp_path: Path
) -> None:
    deep = tmp_path / "elsewhere" / "deep"
    deep.mkdir(parents=True)
    (workspace / "jump").symlink_to(deep)
    # Lexically `jump/..` is the workspace; the kernel goes to `elsewhere` instead.
    with pytest.raises(WorkspaceEscapeError):
        resolve_path(workspace, "jump/../file.txt")


def test_symlink_inside_the_workspace_resolves_to_its_target(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real")
    assert resolve_path(workspace, "alias/a.txt") == workspace / "real" / "a.txt"


def test_workspace_reached_through_a_symlink_accepts_its_files(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    linked = tmp_path / "ws-link"
    linked.symlink_to(real)
    assert resolve_path(linked, str(linked / "a.txt")) == real / "a.txt"


def test_missing_workspace_is_created_on_first_use(tmp_path: Path) -> None:
    workspace = tmp_path / "new" / "workspace"
    resolve_path(workspace, "a.txt")
    assert workspace.is_dir()


def test_empty_path_is_a_tool_error(workspace: Path) -> None:
    with pytest.raises(ToolError) as caught:
        resolve_path(workspace, "  ")
    assert not isinstance(caught.value, WorkspaceEscapeError)


def test_nul_byte_in_path_is_a_tool_error(workspace: Path) -> None:
    with pytest.raises(ToolError):
        resolve_path(workspace, "a\0b")


def test_display_path_is_relative_to_the_workspace(workspace: Path) -> None:
    assert display_path(workspace, workspace / "src" / "a.py") == "src/a.py"
    assert display_path(workspace, workspace) == "."


def test_dangling_symlink_pointing_outside_is_refused(workspace: Path, tmp_path: Path) -> None:
    # Writing through it would create the target outside the workspace.
    (workspace / "trap.txt").symlink_to(tmp_path / "not-yet-there.txt")
    with pytest.raises(WorkspaceEscapeError):
        resolve_path(workspace, "trap.txt")
