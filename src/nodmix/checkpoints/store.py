"""Where pre-compaction checkpoints are kept: the `CheckpointStore` seam and its file store.

A checkpoint is a session's active transcript as it was just before a compaction changed it
(complete lines only), so a bad summary can be rolled back with `nodmix sessions restore`.
They are bounded three ways:

- a transcript larger than `max_transcript_bytes` (16 MiB) is not copied: the compaction goes
  ahead without a checkpoint rather than doubling the disk use of a huge session;
- each session keeps its newest `keep_per_session` (5);
- each agent keeps at most `max_agent_bytes` (128 MiB, compressed) and `max_agent_count`
  (100) of them; the oldest go first.

`FileCheckpointStore` writes one file per checkpoint under
`$NODMIX_STATE_DIR/agents/<agent>/checkpoints/<id>.ckpt`: a line of JSON describing it, then the
transcript compressed with zstd. Files are written atomically with mode 0600; a file that cannot
be read is skipped when listing (and can be deleted by hand). Another backend (PostgreSQL) can
stand in behind the same protocol.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from pathlib import Path
from typing import Final, Protocol

import msgspec

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.errors import SessionError
from nodmix.stores import provided

log = logging.getLogger("nodmix.checkpoints")

MAX_TRANSCRIPT_BYTES: Final = 16 * 1024 * 1024
KEEP_PER_SESSION: Final = 5
MAX_AGENT_BYTES: Final = 128 * 1024 * 1024
MAX_AGENT_COUNT: Final = 100
SUFFIX: Final = ".ckpt"
_ID_RE: Final = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")
_MAX_META_BYTES: Final = 16 * 1024
_LEVEL: Final = 3


class CheckpointError(SessionError):
    """A checkpoint is unknown, ambiguous, unreadable or belongs to another session."""


class CheckpointInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What a checkpoint is of (its first line in the file store)."""

    id: str
    agent_id: str
    session_key: str
    session_id: str
    created_at: int
    """Milliseconds since the epoch."""
    trigger: str
    """What the checkpoint was taken for: a compaction trigger (`auto`, `manual`, `overflow`,
    `budget`) or `restore` (the transcript a restore replaced)."""
    transcript: str
    """File name of the transcript it copies."""
    transcript_bytes: int
    entries: int
    messages: int
    tokens_before: int | None = None
    stored_bytes: int = 0


class CheckpointStore(Protocol):
    """Keeps checkpoints; the file store is `FileCheckpointStore`."""

    @property
    def max_transcript_bytes(self) -> int:
        """Transcripts larger than this are not copied."""
        ...

    def save(self, info: CheckpointInfo, transcript: bytes) -> CheckpointInfo:
        """Keep a checkpoint (then drop the oldest past the caps); the stored description.

        Raises:
            OSError: it could not be written.
        """
        ...

    def list_checkpoints(
        self, agent_id: str, session_key: str | None = None
    ) -> list[CheckpointInfo]:
        """An agent's checkpoints (of one session, with `session_key`), newest first."""
        ...

    def read(self, agent_id: str, checkpoint_id: str) -> tuple[CheckpointInfo, bytes]:
        """A checkpoint's description and transcript bytes.

        Raises:
            CheckpointError: unknown id, or the file is damaged.
        """
        ...


def new_checkpoint_id(now: float | None = None) -> str:
    """`YYYYmmdd-HHMMSS-xxxx` (UTC): sortable by time, unique by its random tail."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(2)}"


def open_checkpoint_store(state_dir: Path) -> CheckpointStore:
    """The checkpoint store of the state backend serving `state_dir` (files by default)."""
    shared: CheckpointStore | None = provided(state_dir, "checkpoints")
    return shared if shared is not None else FileCheckpointStore(state_dir)


class FileCheckpointStore:
    """Checkpoints as files under each agent's `checkpoints/` folder."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_transcript_bytes: int = MAX_TRANSCRIPT_BYTES,
        keep_per_session: int = KEEP_PER_SESSION,
        max_agent_bytes: int = MAX_AGENT_BYTES,
        max_agent_count: int = MAX_AGENT_COUNT,
    ) -> None:
        self.state_dir = state_dir
        self._max_transcript_bytes = max_transcript_bytes
        self.keep_per_session = keep_per_session
        self.max_agent_bytes = max_agent_bytes
        self.max_agent_count = max_agent_count

    @property
    def max_transcript_bytes(self) -> int:
        return self._max_transcript_bytes

    def folder(self, agent_id: str) -> Path:
        """`<state>/agents/<agent>/checkpoints`."""
        return self.state_dir / "agents" / agent_id / "checkpoints"

    def save(self, info: CheckpointInfo, transcript: bytes) -> CheckpointInfo:
        import zstandard  # (on first use: most processes never take a checkpoint)

        if not _ID_RE.match(info.id):
            raise ValueError(f"invalid checkpoint id {info.id!r}")
        body = zstandard.ZstdCompressor(level=_LEVEL).compress(transcript)
        head = msgspec.structs.replace(
            info, transcript_bytes=len(transcript), stored_bytes=len(body)
        )
        folder = ensure_private_dir(self.folder(info.agent_id))
        atomic_write(folder / f"{info.id}{SUFFIX}", msgspec.json.encode(head) + b"\n" + body)
        self._prune(info.agent_id)
        return head

    def list_checkpoints(
        self, agent_id: str, session_key: str | None = None
    ) -> list[CheckpointInfo]:
        found = []
        for path in self._files(agent_id):
            info = _read_info(path)
            if info is None or info.agent_id != agent_id:
                continue
            if session_key is None or info.session_key == session_key:
                found.append(info)
        found.sort(key=lambda i: (i.created_at, i.id), reverse=True)
        return found

    def read(self, agent_id: str, checkpoint_id: str) -> tuple[CheckpointInfo, bytes]:
        import zstandard

        if not _ID_RE.match(checkpoint_id):
            raise CheckpointError(f"no checkpoint {checkpoint_id!r}")
        path = self.folder(agent_id) / f"{checkpoint_id}{SUFFIX}"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"no checkpoint {checkpoint_id!r}") from None
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot read checkpoint: {exc.strerror}") from None
        newline = data.find(b"\n", 0, _MAX_META_BYTES)
        try:
            info = msgspec.json.decode(data[:newline], type=CheckpointInfo)
            limit = max(info.transcript_bytes, 0)
            body = zstandard.ZstdDecompressor().decompress(
                data[newline + 1 :], max_output_size=limit
            )
        except (msgspec.DecodeError, msgspec.ValidationError, zstandard.ZstdError) as exc:
            raise CheckpointError(f"{path}: damaged checkpoint ({exc})") from None
        if newline < 0 or len(body) != info.transcript_bytes:
            raise CheckpointError(f"{path}: damaged checkpoint (size mismatch)")
        return info, body

    # ---- bounds ---------------------------------------------------------------------------

    def _files(self, agent_id: str) -> list[Path]:
        try:
            names = os.listdir(self.folder(agent_id))
        except OSError:
            return []
        folder = self.folder(agent_id)
        return [folder / n for n in names if n.endswith(SUFFIX) and _ID_RE.match(n[: -len(SUFFIX)])]

    def _prune(self, agent_id: str) -> None:
        """Drop checkpoints past the per-session and per-agent caps, oldest first."""
        kept: list[CheckpointInfo] = []
        per_session: dict[str, int] = {}
        total = 0
        for info in self.list_checkpoints(agent_id):  # newest first
            count = per_session.get(info.session_key, 0)
            over = (
                count >= self.keep_per_session
                or len(kept) >= self.max_agent_count
                or total + info.stored_bytes > self.max_agent_bytes
            )
            if over:
                self._delete(agent_id, info.id)
                continue
            per_session[info.session_key] = count + 1
            total += info.stored_bytes
            kept.append(info)

    def _delete(self, agent_id: str, checkpoint_id: str) -> None:
        try:
            (self.folder(agent_id) / f"{checkpoint_id}{SUFFIX}").unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove checkpoint %s: %s", checkpoint_id, exc)


def _read_info(path: Path) -> CheckpointInfo | None:
    try:
        with path.open("rb") as handle:
            head = handle.read(_MAX_META_BYTES)
    except OSError:
        return None
    newline = head.find(b"\n")
    if newline < 0:
        return None
    try:
        return msgspec.json.decode(head[:newline], type=CheckpointInfo)
    except (msgspec.DecodeError, msgspec.ValidationError):
        log.warning("skipping unreadable checkpoint %s", path)
        return None
