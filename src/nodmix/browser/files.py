"""Files the browser puts into the agent's workspace: downloads, screenshots and PDFs.

The workspace is shared with sandboxed commands, which can leave `downloads` or `browser` (or
a file in them) as a symlink to any folder or file of the host. The browser runs on the host,
so it must not follow one: each file is created in a folder opened without following symlinks
(`nodmix.tools.confined`), as a new file (`O_EXCL | O_NOFOLLOW`), under the first free name
(`name`, `name (2)`, ...). A planted link makes the save fail with a line saying so; it never
lets a page choose a file of the host to write.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from nodmix.tools.confined import copy_into, open_folder

MAX_NAME_CHARS = 120
"""Longer names (a page chooses a download's name) are cut, keeping the extension."""
_TRIES = 1000


def _candidates(name: str) -> list[str]:
    path = PurePath(name)
    suffix = path.suffix if len(path.suffix) <= 16 else ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    stem = stem[: MAX_NAME_CHARS - len(suffix)] or "file"
    return [f"{stem}{suffix}"] + [f"{stem} ({n}){suffix}" for n in range(2, _TRIES)]


def place_file(workspace: Path, folder: str, name: str, source: Path) -> str:
    """Copy `source` to a new file `<folder>/<name>` in the workspace (`name (2)` and so on
    when taken); the workspace-relative path.

    Raises:
        WorkspaceEscapeError: the folder (or one above it) is a symlink.
        OSError: the copy failed, or no free name was found.
    """
    with open_folder(workspace, PurePath(folder), create=True) as fd:
        for candidate in _candidates(name):
            try:
                copy_into(source, fd, candidate)
            except FileExistsError:
                continue
            return f"{folder}/{candidate}"
    raise OSError(f"no free name for {name} in {folder}/")


def save_new(workspace: Path, folder: str, name: str, data: bytes) -> str:
    """Write `data` to a new file `<folder>/<name>` in the workspace (see `place_file`).

    Raises:
        WorkspaceEscapeError: the folder (or one above it) is a symlink.
        OSError: the write failed, or no free name was found.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with open_folder(workspace, PurePath(folder), create=True) as fd:
        for candidate in _candidates(name):
            try:
                out = os.open(candidate, flags, 0o644, dir_fd=fd)
            except FileExistsError:
                continue
            try:
                with os.fdopen(out, "wb") as handle:
                    handle.write(data)
            except BaseException:
                os.unlink(candidate, dir_fd=fd)
                raise
            return f"{folder}/{candidate}"
    raise OSError(f"no free name for {name} in {folder}/")
