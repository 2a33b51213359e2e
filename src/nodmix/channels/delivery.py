"""Delivery state of one channel: at-least-once in, exactly-once answered.

Under `<state>/channels/<id>/`:

- `position.json`: the platform's resume point (Telegram's update offset), saved only after
  every message before it was accepted;
- `pending/`: one file per accepted message not yet answered, written before the position
  moves past it. After a restart or a crash the pending messages are run again;
- `answered.json`: the keys of recently answered messages, so a message the platform delivers
  again (the position was not saved yet) is not answered twice;
- `<name>.jsonl`: append-only records a channel adds to with every message (`records`),
  compacted by their owner when they grow.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgspec

from nodmix.channels.files import channels_dir, read_json, write_json
from nodmix.channels.records import RecordFile
from nodmix.channels.types import InboundMessage
from nodmix.stores import provided

ANSWERED_KEPT = 2000


def open_delivery_log(state_dir: Path, channel: str) -> DeliveryLog:
    """The delivery state of the backend serving `state_dir` (files by default)."""
    found = provided(state_dir, "channels.delivery", channel)
    return found if isinstance(found, DeliveryLog) else DeliveryLog(state_dir, channel)


class DeliveryLog:
    """Position, pending messages and answered keys of one channel."""

    shared = False
    """Whether other processes change this state too (gateway replicas on the postgres
    backend): a store that caches the position reads it again before trusting a miss."""

    def __init__(self, state_dir: Path, channel: str) -> None:
        self.root = channels_dir(state_dir) / channel
        self.pending_dir = self.root / "pending"
        self._answered_path = self.root / "answered.json"
        loaded = read_json(self._answered_path, {}).get("keys", [])
        self._answered: deque[str] = deque(
            (str(k) for k in loaded if isinstance(k, str)), maxlen=ANSWERED_KEPT
        )
        self._answered_set = set(self._answered)
        self._seq = 0
        self._record_files: dict[str, RecordFile] = {}

    # ---- position -------------------------------------------------------------------------

    def position(self) -> dict[str, Any]:
        """The saved resume point (empty when there is none)."""
        return read_json(self.root / "position.json", {})

    def save_position(self, position: dict[str, Any]) -> None:
        """Persist the resume point."""
        write_json(self.root / "position.json", position)

    # ---- records --------------------------------------------------------------------------

    def records(self, name: str, after: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The records of `name` appended after mark `after` (0: all), and the new mark."""
        return self._record_file(name).read(after)

    def record_names(self) -> list[str]:
        """The names that have records."""
        return sorted(p.stem for p in self.root.glob("*.jsonl")) if self.root.is_dir() else []

    def append_record(self, name: str, record: dict[str, Any]) -> None:
        """Add one record to `name`, durably, without rewriting the others."""
        self._record_file(name).append(record)

    def compact_records(
        self, name: str, records: list[dict[str, Any]], *, upto: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Replace the records of `name` up to mark `upto` with `records`, atomically. Any
        appended after `upto` stay (after them) and are returned, with the new mark."""
        file = self._record_file(name)
        later, _ = file.read(upto)
        mark = file.compact([*records, *later])
        return later, mark

    def _record_file(self, name: str) -> RecordFile:
        file = self._record_files.get(name)
        if file is None:
            file = self._record_files[name] = RecordFile(self.root / f"{name}.jsonl")
        return file

    # ---- messages -------------------------------------------------------------------------

    def _file(self, msg: InboundMessage) -> Path:
        digest = hashlib.sha256(msg.key.encode()).hexdigest()[:24]
        return self.pending_dir / f"{digest}.json"

    def seen(self, msg: InboundMessage) -> bool:
        """Answered already, or waiting to be."""
        return msg.key in self._answered_set or self._file(msg).exists()

    def accept(self, msg: InboundMessage) -> bool:
        """Record `msg` as pending (durably); False when it is a duplicate."""
        if self.seen(msg):
            return False
        self._seq += 1
        record = {"receivedAt": time.time(), "seq": self._seq, "message": msg}
        write_json(self._file(msg), msgspec.to_builtins(record, enc_hook=str))
        return True

    def done(self, msg: InboundMessage) -> None:
        """`msg` is answered: remember its key and drop its pending file."""
        if msg.key not in self._answered_set:
            if len(self._answered) == self._answered.maxlen:
                self._answered_set.discard(self._answered[0])
            self._answered.append(msg.key)
            self._answered_set.add(msg.key)
            write_json(self._answered_path, {"keys": list(self._answered)})
        self._file(msg).unlink(missing_ok=True)

    def pending(self) -> list[InboundMessage]:
        """Messages accepted but not answered (oldest first)."""
        if not self.pending_dir.is_dir():
            return []
        found: list[tuple[float, int, InboundMessage]] = []
        for path in self.pending_dir.glob("*.json"):
            raw = read_json(path, {})
            try:
                msg = msgspec.convert(raw.get("message"), InboundMessage)
            except msgspec.ValidationError:
                path.unlink(missing_ok=True)
                continue
            if msg.key in self._answered_set:  # answered, then stopped before this went
                path.unlink(missing_ok=True)
                continue
            found.append((float(raw.get("receivedAt", 0)), int(raw.get("seq", 0)), msg))
        found.sort(key=lambda item: (item[0], item[1]))
        return [msg for _, _, msg in found]
