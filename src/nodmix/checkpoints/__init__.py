"""Pre-compaction checkpoints: a bounded copy of a session's transcript before each
compaction, and rolling a session back to one (`nodmix sessions checkpoints|restore`)."""

from nodmix.checkpoints.capture import take_checkpoint
from nodmix.checkpoints.store import (
    CheckpointError,
    CheckpointInfo,
    CheckpointStore,
    FileCheckpointStore,
    open_checkpoint_store,
)

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointStore",
    "FileCheckpointStore",
    "open_checkpoint_store",
    "take_checkpoint",
]
