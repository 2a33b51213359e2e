"""Rolling a session back to a checkpoint (`nodmix sessions restore`).

Nothing is lost either way: the session continues in a new transcript holding the checkpoint's
entries (its header names the replaced file as `parentSession`, like a compaction successor),
the replaced transcript stays on disk, and a checkpoint of it is taken first (trigger
`restore`), so restoring that one undoes the restore. The new transcript ends with a
`nodmix.checkpoint-restored` custom entry (the model never sees it) saying where it came
from. Hold the session's turn lock around it (`SessionManager.hold_turn`): no turn may append
meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from nodmix.checkpoints.capture import take_checkpoint
from nodmix.checkpoints.store import CheckpointError, CheckpointInfo, CheckpointStore
from nodmix.errors import TranscriptError
from nodmix.sessions.entries import CustomEntry, Entry, iso_now, new_entry_id
from nodmix.sessions.jsonl import find_complete_end, parse_body, parse_header
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.successors import RESTORED_TYPE

MIN_PREFIX: Final = 4


class Restored(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What `restore_checkpoint` did."""

    session_key: str
    session_id: str
    """The session's new id (its new transcript)."""
    checkpoint: CheckpointInfo
    replaced: str
    """File name of the transcript the session left (kept on disk)."""
    saved: CheckpointInfo | None
    """The checkpoint of the replaced transcript (None when it was over the cap)."""


def find_checkpoint(
    store: CheckpointStore, agent_id: str, session_key: str, ref: str
) -> CheckpointInfo:
    """The checkpoint of `session_key` that `ref` names: an id, a unique prefix of one, or
    `latest`.

    Raises:
        CheckpointError: none, several, or one of another session.
    """
    ref = ref.strip()
    mine = store.list_checkpoints(agent_id, session_key)
    if ref == "latest":
        if not mine:
            raise CheckpointError(f"session {session_key} has no checkpoints")
        return mine[0]
    exact = [i for i in mine if i.id == ref]
    if exact:
        return exact[0]
    matches = [i for i in mine if len(ref) >= MIN_PREFIX and i.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        ids = ", ".join(i.id for i in matches[:5])
        raise CheckpointError(f"checkpoint {ref!r} is ambiguous ({ids}); give more of the id")
    other = next((i for i in store.list_checkpoints(agent_id) if i.id.startswith(ref)), None)
    if other is not None and len(ref) >= MIN_PREFIX:
        raise CheckpointError(
            f"checkpoint {other.id} belongs to session {other.session_key}, not {session_key}"
        )
    raise CheckpointError(
        f"session {session_key} has no checkpoint {ref!r}; list them with "
        f"`nodmix sessions checkpoints {session_key}`"
    )


def restore_checkpoint(
    sessions: SessionManager, store: CheckpointStore, session_key: str, ref: str
) -> Restored:
    """Continue `session_key` from checkpoint `ref` (see the module docstring).

    Raises:
        CheckpointError: no such checkpoint, or it is damaged.
        SessionError: the session does not exist.
    """
    key = sessions.resolve_key(session_key)
    found = find_checkpoint(store, key.agent_id, str(key), ref)
    info, data = store.read(key.agent_id, found.id)
    entries = _entries(info, data)
    current = sessions.open(key, create=False)
    replaced = current.transcript.path.name
    saved = take_checkpoint(store, current, trigger="restore")
    # The new transcript is written whole (fsynced) before the index switches to it, so a crash
    # leaves the session on the old transcript or on the complete restored one.
    marker = CustomEntry(
        id=new_entry_id(),
        parent_id=entries[-1].id if entries else None,
        timestamp=iso_now(),
        custom_type=RESTORED_TYPE,
        data={"checkpoint": info.id, "from": info.transcript, "replaced": replaced},
    )
    successor = sessions.rotate(
        key, workspace=Path(current.transcript.header.cwd), seed=[*entries, marker]
    )
    return Restored(
        session_key=str(key),
        session_id=successor.session_id,
        checkpoint=info,
        replaced=replaced,
        saved=saved,
    )


def _entries(info: CheckpointInfo, data: bytes) -> list[Entry]:
    """The checkpoint's entries (its header is replaced by the new transcript's)."""
    name = Path(f"checkpoint {info.id}")
    try:
        _, start = parse_header(name, data)
        end, _ = find_complete_end(data, start)
        return parse_body(name, data, start, end)
    except TranscriptError as exc:
        raise CheckpointError(f"damaged checkpoint: {exc}") from None
