"""Which workspace paths become the owner's instructions, and who may write them.

Some files in an agent workspace are not just data: Nodmix reads them into the owner's turns.
`MEMORY.md` goes into every system prompt, `HEARTBEAT.md` is the heartbeat's checklist, the
names of `memory/*.md` are listed in the prompt, and each skill under `skills/` adds its
description to every later system prompt. A turn that does not speak for the owner (a group
chat, a per-peer DM, a cron, heartbeat or webhook run; `nodmix.origin.is_owner_turn`) writing
them would be a prompt injection into the owner's sessions.

`agents.defaults.sandbox.workspaceAccess` (per agent too) says what such a turn may write:

- `protected` (the default): everything except the paths below;
- `ro`: nothing in the workspace (its own notes file under `memory/peers/` aside);
- `rw`: everything, as the owner (for an agent whose every sender is trusted).

The owner's turns always write everything. `write`/`edit` ask `refusal` with the path they are
about to write (already resolved, so `..`, symlinks and case do not get around it), and the
bubblewrap sandbox of a non-owner turn binds `sandbox_readonly` read-only.

A non-owner session keeps its notes in `memory/peers/<channel>-<chat>.md`: searchable with
`memory_search`, never listed in or injected into a prompt.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, TypeAlias

from nodmix.origin import TurnOrigin, is_owner_turn

if TYPE_CHECKING:
    from nodmix.config.schema import NodmixConfig

WorkspaceAccess: TypeAlias = Literal["protected", "ro", "rw"]
DEFAULT_ACCESS: WorkspaceAccess = "protected"

PROTECTED_FILES = ("MEMORY.md", "HEARTBEAT.md")
"""Top-level files read into the owner's turns (system prompt, heartbeat checklist)."""
PROTECTED_DIRS = ("memory", "skills")
"""Top-level folders whose content or names reach the owner's prompt."""
PEERS_DIR = PurePosixPath("memory", "peers")
"""Where non-owner sessions keep their notes (not listed in or injected into any prompt)."""

MAX_LINK_SCAN = 10_000
"""Entries looked at under the protected folders for links out of them (`linked_targets`)."""

_UNSAFE = r"[^A-Za-z0-9._-]+"


def instruction_sources(config: NodmixConfig, config_file: Path) -> tuple[Path, ...]:
    """Files and folders outside the fixed names that Nodmix loads as instructions or code,
    absolute: the config file, `plugins.load.paths` and `skills.load.extraDirs` (relative to
    the config file's folder). Those inside a workspace are protected like the fixed names."""
    base = config_file.parent
    found = [config_file]
    for text in [*config.plugins.load.paths, *config.skills.load.extra_dirs]:
        path = Path(text).expanduser()
        found.append(path if path.is_absolute() else base / path)
    return tuple(Path(os.path.abspath(p)) for p in found)


def peer_notes(origin: TurnOrigin) -> PurePosixPath:
    """The notes file of a non-owner chat: `memory/peers/<channel>-<chat>.md`. When the chat
    id needs characters replaced to make a file name, has capital letters, or the chat is on
    an account other than `default`, a hash of channel, account and chat id follows, so no two
    chats share a file (`irc` chats `#ops` and `_ops`, `Ops` and `ops` on a case-insensitive
    file system, or `#ops` on two accounts)."""
    raw = f"{origin.channel}-{origin.chat_id}"
    slug = re.sub(_UNSAFE, "_", raw).strip("._") or "unknown"
    if slug != raw.lower() or len(slug) > 120 or origin.account != "default":
        key = "\0".join((origin.channel, origin.account, origin.chat_id)).encode()
        slug = f"{slug[:100]}-{hashlib.sha256(key).hexdigest()[:12]}"
    return PEERS_DIR / f"{slug}.md"


def speaks_for_owner(origin: TurnOrigin | None, agent_id: str, session_key: str) -> bool:
    """Whether a turn writes as the owner (`nodmix.origin.is_owner_turn`)."""
    return is_owner_turn(origin, agent_id, session_key)


def protected_paths(workspace: Path, also: Sequence[Path] = ()) -> list[Path]:
    """The protected paths of `workspace`, resolved: each top-level name, where it leads when
    it is a symlink to somewhere else in the workspace, the paths of `also` (the config
    file) that lie inside the workspace, and where links inside `memory/` and `skills/` lead
    (`linked_targets`)."""
    root = workspace.resolve()
    found: list[Path] = []
    for path in [*_fixed(root), *also]:
        path = Path(os.path.abspath(path))
        target = path.resolve()
        found += [p for p in (path, target) if p.is_relative_to(root) and p != root]
    return found + linked_targets(root)


def linked_targets(workspace: Path) -> list[Path]:
    """Where the symlinks under `memory/` and `skills/` lead when that is elsewhere in the
    workspace (a skill folder the owner keeps in `projects/` and links in), resolved, and
    where links under those places lead in turn: Nodmix follows them, so they are read as
    the owner's instructions too. At most `MAX_LINK_SCAN` entries are looked at."""
    root = workspace.resolve()
    todo = [root / name for name in PROTECTED_DIRS]
    found: list[Path] = []
    seen = 0
    while todo:
        top = todo.pop().resolve()  # a linked top-level folder: the folder it leads to
        if not top.is_relative_to(root) or not top.is_dir():
            continue
        for folder, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                seen += 1
                if seen > MAX_LINK_SCAN:
                    return found
                path = Path(folder, name)
                if not path.is_symlink():
                    continue
                target = path.resolve()
                inside = target.is_relative_to(root) and target != root
                if inside and not any(target.is_relative_to(p) for p in [*found, *_fixed(root)]):
                    found.append(target)
                    todo.append(target)
    return found


def _fixed(root: Path) -> list[Path]:
    return [root / name for name in PROTECTED_FILES + PROTECTED_DIRS]


def _relative(root: Path, path: Path) -> PurePosixPath | None:
    if path != root and not path.is_relative_to(root):
        return None
    return PurePosixPath(path.relative_to(root).as_posix())


def _folded(path: PurePosixPath) -> tuple[str, ...]:
    return tuple(part.casefold() for part in path.parts)


def refusal(
    workspace: Path,
    path: Path,
    *,
    origin: TurnOrigin | None,
    agent_id: str,
    session_key: str,
    access: WorkspaceAccess = DEFAULT_ACCESS,
    also: Sequence[Path] = (),
) -> str | None:
    """Why this turn may not write `path` (resolved, inside `workspace`), or None if it may.

    Names are compared case-insensitively, so `memory.md` on a case-insensitive file system
    is the same file as `MEMORY.md` here too."""
    if access == "rw" or speaks_for_owner(origin, agent_id, session_key):
        return None
    assert origin is not None  # only the owner's turns have none
    root = workspace.resolve()
    rel = _relative(root, path)
    if rel is None:
        return None  # outside the workspace: the path check refuses it
    own = peer_notes(origin)
    if rel == own:  # exactly: `telegram-G1.md` is another chat's file where case matters
        return None
    who = f"a turn from {origin.channel} (not the owner)"
    if access == "ro":
        return (
            f"{rel} is not writable from {who}: the workspace is read-only for other senders "
            f"(agents.defaults.sandbox.workspaceAccess: ro); keep notes in {own}."
        )
    for protected in protected_paths(workspace, also):
        prel = _relative(root, protected)
        if prel is None:
            continue
        want = _folded(prel)
        if _folded(rel)[: len(want)] == want:
            return (
                f"{rel} is not writable from {who}: the owner's sessions read it as "
                f"instructions. Keep notes in {own}, or other files of the workspace "
                "(agents.defaults.sandbox.workspaceAccess sets this)."
            )
    return None


def keep_inode(workspace: Path, path: Path) -> bool:
    """Whether writing `path` (resolved) must rewrite the file in place rather than replace it:
    a protected top-level file, which a running sandbox of another sender holds read-only by
    a bind mount that a rename over it would lift (the kernel detaches mounts on a replaced
    file in every namespace)."""
    rel = _relative(workspace.resolve(), path)
    folded = {name.casefold() for name in PROTECTED_FILES}
    return rel is not None and len(rel.parts) == 1 and rel.parts[0].casefold() in folded


def sandbox_readonly(
    *,
    origin: TurnOrigin | None,
    agent_id: str,
    session_key: str,
    access: WorkspaceAccess = DEFAULT_ACCESS,
) -> tuple[str, ...]:
    """The top-level workspace names a sandboxed command of this turn sees read-only: `("",)`
    for the whole workspace, () for nothing (the owner, or `workspaceAccess: rw`)."""
    if access == "rw" or speaks_for_owner(origin, agent_id, session_key):
        return ()
    if access == "ro":
        return ("",)
    return PROTECTED_FILES + PROTECTED_DIRS
