"""The workspace's MEMORY.md in the system prompt: only a regular file inside the workspace.

The workspace is shared with sandboxed commands, so MEMORY.md may be whatever such a command
left there: a symlink to a secret of the host, a FIFO, a link to an endless device.
"""

from __future__ import annotations

import os
from pathlib import Path

from nodmix.loop.prompt import MEMORY_CAP_CHARS, read_memory


def test_a_regular_memory_file_is_read_and_capped(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- likes tea\n" + "x" * (MEMORY_CAP_CHARS * 3))
    text = read_memory(tmp_path)
    assert text is not None and text.startswith("- likes tea")
    assert text.endswith("[... truncated]") and len(text) < MEMORY_CAP_CHARS + 100


def test_a_memory_symlink_to_a_file_outside_the_workspace_is_not_read(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"apiKey": "sk-live-123"}')
    (workspace / "MEMORY.md").symlink_to(secret)
    assert read_memory(workspace) is None


def test_a_memory_fifo_does_not_block_and_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "MEMORY.md")
    assert read_memory(tmp_path) is None


def test_a_memory_symlink_to_an_endless_device_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").symlink_to("/dev/zero")
    assert read_memory(tmp_path) is None
