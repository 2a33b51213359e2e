"""The owner's memory, and the turns that may not read it.

`MEMORY.md` and `memory/**` hold what the agent keeps for its owner. A turn that does not
speak for the owner (`nodmix.origin.sees_owner_memory` is false: a group chat, another
sender's DM, a webhook, a cron job that a non-owner turn added, unless `memory.shareWith`
names it) gets none of it:

- no `MEMORY.md` in its system prompt (`nodmix.loop.prompt`);
- `read` and `edit` refuse `MEMORY.md` and everything under `memory/` (`refusal`), checked on
  the path as written (`notes/../MEMORY.md`) and on where it leads (a link to it), ignoring
  letter case;
- `memory_search` and `memory_get` see only the chat's own notes;
- files under those paths cannot be sent as `message` attachments;
- its sandboxed shell sees an empty `MEMORY.md` and an empty, read-only `memory/` folder
  (`sandbox_masks`).

The chat's own notes, `memory/peers/<channel>-<chat>.md` (`workspace_guard.peer_notes`), stay
its own: readable and searchable from that chat.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from nodmix.origin import TurnOrigin, memory_scope, sees_owner_memory
from nodmix.security.workspace_guard import peer_notes

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"


def _relative(root: Path, path: Path) -> PurePosixPath | None:
    if path != root and not path.is_relative_to(root):
        return None
    return PurePosixPath(path.relative_to(root).as_posix())


def is_memory_path(rel: PurePosixPath) -> bool:
    """Whether a workspace-relative path is `MEMORY.md` or lies under `memory/` (any case)."""
    if not rel.parts:
        return False
    head = rel.parts[0].casefold()
    return (head == MEMORY_FILE.casefold() and len(rel.parts) == 1) or head == MEMORY_DIR


def refusal(
    workspace: Path,
    path: Path,
    *,
    written: str | None,
    origin: TurnOrigin | None,
    agent_id: str,
    session_key: str,
    verb: str = "read",
) -> str | None:
    """Why this turn may not read `path` (resolved) or `written` (the path as the call named
    it, relative to the workspace), or None when it may."""
    if sees_owner_memory(origin, agent_id, session_key):
        return None
    assert origin is not None  # only the owner's turns have none
    root = workspace.resolve()
    own = peer_notes(origin)
    candidates = [path]
    if written is not None:
        candidates.append(Path(os.path.normpath(root / written)))
    for candidate in candidates:
        rel = _relative(root, candidate)
        if rel is None or not is_memory_path(rel) or rel == own:
            continue
        return (
            f"cannot {verb} {rel}: MEMORY.md and memory/ are the owner's memory, which a turn "
            f"from {_where(origin)} does not see (memory.shareWith lists the chats that may); "
            f"this chat's own notes are {own}."
        )
    return None


def _where(origin: TurnOrigin) -> str:
    scope = memory_scope(origin)
    return scope if scope is not None else origin.channel


def sandbox_masks(
    workspace: Path, *, origin: TurnOrigin | None, agent_id: str, session_key: str
) -> tuple[list[Path], Path | None]:
    """`(masked, own_notes)` for a sandboxed command of this turn: the paths to show empty
    (`MEMORY.md`, created empty first so a file made while the command runs stays hidden, and
    `memory/`), and the chat's own notes file to show again inside `memory/` (when it
    exists). Nothing for a turn that sees the owner's memory."""
    if sees_owner_memory(origin, agent_id, session_key):
        return [], None
    assert origin is not None
    root = workspace.resolve()
    memory_file = root / MEMORY_FILE
    if not os.path.lexists(memory_file):
        os.close(os.open(memory_file, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
    folder = root / MEMORY_DIR
    folder.mkdir(exist_ok=True)
    own = root / peer_notes(origin)
    keep = own if own.is_file() and not own.is_symlink() else None
    return [memory_file, folder], keep
