"""Files the agent sends to a chat: checked in the workspace and read at once.

The workspace is shared with sandboxed commands, which could swap a checked file for a symlink
to a secret of the host before an adapter reads it (the text goes out first, a network round
trip later). So the bytes are read when the path is checked, through descriptors that never
follow a symlink, and the adapters send those bytes.
"""

from __future__ import annotations

from pathlib import Path

from nodmix.channels.types import Attachment
from nodmix.errors import WorkspaceEscapeError
from nodmix.tools.confined import read_head

MAX_ATTACHMENT_BYTES = 50 << 20
"""The largest file the agent may send (the Bot API's upload limit)."""


def attachment_paths(paths: list[str], workspace: Path) -> tuple[Attachment, ...]:
    """Workspace-relative file paths as outbound attachments (must stay in the workspace),
    read at once without following symlinks (what is sent is what was checked).

    Raises:
        ValueError: a path leaves the workspace, is not a file, or is too large.
    """
    out = []
    root = workspace.resolve()
    for text in paths:
        path = (root / text).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ValueError(f"{text}: not a file in the workspace")
        try:
            data = read_head(root, path.relative_to(root), MAX_ATTACHMENT_BYTES + 1)
        except (OSError, WorkspaceEscapeError) as exc:
            raise ValueError(f"{text}: cannot be read ({exc})") from None
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise ValueError(f"{text}: larger than {MAX_ATTACHMENT_BYTES // (1 << 20)} MB")
        out.append(Attachment(kind="document", name=path.name, path=path, data=data))
    return tuple(out)
