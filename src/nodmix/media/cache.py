"""Prepared images kept in memory, so a photo that stays in the last few turns is decoded and
downscaled once, not on every model request.

Keyed by the file's identity (device, inode, size, modification time) and the long side, so a
file replaced under the same name is prepared again. Bounded by total bytes (least recently
used first out); one process-wide cache serves every session.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from nodmix.messages import ImageBlock

DEFAULT_MAX_BYTES = 64 << 20
"""Base64 bytes kept at most (about forty 1568-pixel photos)."""

CacheKey = tuple[int, int, int, int, int]


def file_key(stat: os.stat_result, max_side: int) -> CacheKey:
    """The cache key of a file as `stat` saw it, prepared to `max_side`."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, max_side)


class ImageCache:
    """A byte-bounded LRU of prepared images (thread-safe: preparation runs in workers)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[CacheKey, ImageBlock] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> ImageBlock | None:
        """The prepared image, or None."""
        with self._lock:
            block = self._items.get(key)
            if block is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return block

    def put(self, key: CacheKey, block: ImageBlock) -> None:
        """Keep `block`, dropping the least recently used beyond the byte bound."""
        size = len(block.data)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old.data)
            self._items[key] = block
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped.data)

    @property
    def size_bytes(self) -> int:
        """Bytes held now."""
        return self._bytes
