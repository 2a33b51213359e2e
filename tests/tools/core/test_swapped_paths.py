"""File tools against a workspace another process changes between the path check and the open.

A sandboxed command shares the workspace and can swap a folder (or the file) for a symlink to
the host after `resolve_path` checked the path. What the file helpers then see is exactly that
state: a resolved path with a link on the way. They must refuse it, never follow it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodmix.errors import ToolError
from nodmix.tools.core.textfiles import read_lines, read_text, write_atomic


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "authorized_keys").write_text("ssh-ed25519 AAAA owner\n")
    return workspace.resolve(), outside.resolve()


def test_a_folder_swapped_for_a_link_after_the_check_is_not_written_through(
    layout: tuple[Path, Path],
) -> None:
    workspace, outside = layout
    checked = workspace / "notes" / "authorized_keys"  # what resolve_path returned
    (workspace / "notes").symlink_to(outside)  # swapped in after the check
    with pytest.raises(ToolError, match="symlink"):
        write_atomic(checked, b"ssh-ed25519 AAAA attacker\n", "notes/authorized_keys")
    assert (outside / "authorized_keys").read_text() == "ssh-ed25519 AAAA owner\n"
    assert sorted(os.listdir(outside)) == ["authorized_keys"]


def test_a_file_swapped_for_a_link_after_the_check_is_not_read(
    layout: tuple[Path, Path],
) -> None:
    workspace, outside = layout
    checked = workspace / "keys.txt"
    checked.symlink_to(outside / "authorized_keys")
    with pytest.raises(ToolError, match="symlink"):
        read_lines(checked, "keys.txt", offset=1, limit=10, max_bytes=1000)
    with pytest.raises(ToolError, match="symlink"):
        read_text(checked, "keys.txt")


def test_a_file_swapped_for_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path.resolve() / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(ToolError, match="not a regular file"):
        read_text(fifo, "pipe.txt")


def test_writes_replace_the_file_in_place_and_keep_its_mode(tmp_path: Path) -> None:
    target = tmp_path.resolve() / "a" / "b" / "c.txt"
    write_atomic(target, b"one\n", "a/b/c.txt")
    target.chmod(0o640)
    write_atomic(target, b"two\n", "a/b/c.txt")
    assert target.read_bytes() == b"two\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert os.listdir(target.parent) == ["c.txt"]
