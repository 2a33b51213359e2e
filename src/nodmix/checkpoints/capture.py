"""Taking a checkpoint of a session's active transcript (before a compaction, or before a
restore replaces it). Never fails the caller: a checkpoint that cannot be kept is logged."""

from __future__ import annotations

import logging
import os
import time

from nodmix.checkpoints.store import CheckpointInfo, CheckpointStore, new_checkpoint_id
from nodmix.errors import NodmixError
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.session import Session

log = logging.getLogger("nodmix.checkpoints")


def take_checkpoint(
    store: CheckpointStore,
    session: Session,
    *,
    trigger: str,
    tokens_before: int | None = None,
) -> CheckpointInfo | None:
    """Copy `session`'s transcript as this process last read it (complete lines only) into
    `store`; None when it is over the size cap or could not be written."""
    transcript = session.transcript
    size = transcript.size_bytes
    limit = store.max_transcript_bytes
    if size > limit:
        log.info(
            "no checkpoint of %s before %s: its transcript is %d MiB, over the %d MiB cap",
            session.key,
            trigger,
            size >> 20,
            limit >> 20,
        )
        return None
    try:
        data = transcript.complete_bytes()
    except (OSError, NodmixError) as exc:
        log.warning("no checkpoint of %s: cannot read its transcript: %s", session.key, exc)
        return None
    entries = transcript.entries
    info = CheckpointInfo(
        id=new_checkpoint_id(),
        agent_id=session.agent_id,
        session_key=session.key,
        session_id=session.session_id,
        created_at=time.time_ns() // 1_000_000,
        trigger=trigger,
        transcript=os.path.basename(transcript.path),
        transcript_bytes=len(data),
        entries=len(entries),
        messages=sum(
            1 for e in entries if isinstance(e, MessageEntry) and e.parent_tool_call_id is None
        ),
        tokens_before=tokens_before,
    )
    try:
        return store.save(info, data)
    except OSError as exc:
        log.warning("no checkpoint of %s: %s", session.key, exc)
        return None
