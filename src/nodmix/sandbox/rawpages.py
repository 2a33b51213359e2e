"""The uncompressed pages of the last few snapshots this process made.

A run parked in this process is restored from the very bytes `snapshot.encode` returned, often
moments later. Keeping the pages `encode` compressed (by the identity of the snapshot it
returned) lets that restore skip decompressing them again: the restored memory is the same
either way. Each entry is used once (a restore takes it) and the cache is small and bounded
in entries and bytes, so at worst a restore decompresses as it would without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

MAX_ENTRIES: Final = 8
MAX_BYTES: Final = 8 << 20

_lock = threading.Lock()
# id(snapshot) -> (snapshot, its pages): holding the snapshot keeps its id from being reused.
_entries: OrderedDict[int, tuple[bytes, bytes]] = OrderedDict()
_total = 0


def remember(snapshot: bytes, pages: bytes) -> None:
    """Keep `pages`, the uncompressed pages stored in `snapshot` (dropping the oldest)."""
    global _total
    if len(pages) > MAX_BYTES // 2:
        return
    with _lock:
        _entries[id(snapshot)] = (snapshot, pages)
        _total += len(pages)
        while len(_entries) > MAX_ENTRIES or _total > MAX_BYTES:
            _, (_, dropped) = _entries.popitem(last=False)
            _total -= len(dropped)


def take(snapshot: bytes) -> bytes | None:
    """The pages kept for this very `snapshot` object (forgotten now), or None."""
    global _total
    with _lock:
        entry = _entries.get(id(snapshot))
        if entry is None or entry[0] is not snapshot:
            return None
        del _entries[id(snapshot)]
        _total -= len(entry[1])
        return entry[1]
