"""Keeping tool paths inside the agent workspace.

File tools accept paths from the model. `resolve_path` turns such a path into an absolute path
that is guaranteed (at the time of the check) to lie inside the workspace: `..` segments and
symlinks are resolved first, so neither can be used to step outside.

The check alone cannot stop a process that shares the workspace (a sandboxed command) from
swapping a folder for a symlink between check and use; the file helpers therefore open the
resolved path without following symlinks (`nodmix.tools.confined`), so a swap makes the call
fail instead of leading out.
"""

from __future__ import annotations

from pathlib import Path

from nodmix.errors import ToolError, WorkspaceEscapeError


def resolve_path(workspace: Path, path: str) -> Path:
    """Resolve a tool path against the workspace and refuse anything outside it.

    Relative paths are taken relative to the workspace; absolute paths are accepted only when
    they point inside it. `~` is expanded, so `~/notes.md` works when the workspace lives under
    the home directory. The workspace directory is created if it does not exist yet.

    Args:
        workspace: The agent's workspace directory.
        path: The path as the model wrote it.

    Returns:
        The fully resolved absolute path (symlinks and `..` resolved). It may not exist yet.

    Raises:
        WorkspaceEscapeError: The path, once resolved, lies outside the workspace.
        ToolError: The path is empty or contains a NUL byte.
    """
    if not path.strip():
        raise ToolError("The path is empty; give a file path inside the workspace.")
    if "\0" in path:
        raise ToolError(f"The path {path!r} contains a NUL byte.")
    workspace.mkdir(parents=True, exist_ok=True)
    root = workspace.resolve()
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    # `resolve` follows symlinks component by component before applying `..`, which is exactly
    # what the kernel will do when the tool opens the path.
    resolved = candidate.resolve()
    if resolved != root and not resolved.is_relative_to(root):
        via = "" if Path(path) == resolved else f" (it resolves to {resolved})"
        raise WorkspaceEscapeError(
            f"Path {path!r} is outside the workspace {root}{via}; use a path inside the workspace."
        )
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """How to show a resolved path to the model: relative to the workspace when inside it.

    Args:
        workspace: The agent's workspace directory.
        path: A path returned by `resolve_path`.
    """
    root = workspace.resolve()
    if path == root:
        return "."
    if path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    return str(path)
