"""Snapshot wire format: a fixed header, an opaque `extra` blob, then zstd-compressed memory.

```
offset  size  field
0       8     magic b"NDMXQJS\\x00"
8       2     format version (1)
10      2     compression (1 = zstd)
12      16    build id: first 16 bytes of sha256(quickjs.wasm)
28      4     raw linear-memory size in bytes (a multiple of 64 KiB)
32      4     __stack_pointer
36      4     QuickJS runtime pointer
40      4     QuickJS context pointer
44      4     host scratch pointer (a small buffer the host reuses)
48      4     length of `extra`
52      n     extra (the cell's bridge handles, pending request ids, filename)
52+n    ...   zstd level-1 frame of the linear memory
```

Snapshots are trusted input: a crafted image cannot escape wasm, but it can forge any guest
state, and the pointers in it are handed straight back to the C layer. They are safe only
because they never leave the process and its own private state directory (code mode writes
suspended runs there, mode 0600, to survive a restart). Never accept one from a client, a
shared file or the network. The build id check rejects snapshots of
another `quickjs.wasm`; it is not an authenticity check.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import zstandard

from nodmix.sandbox.base import SnapshotError
from nodmix.sandbox.vmstate import VMImage

MAGIC: Final = b"NDMXQJS\x00"
FORMAT_VERSION: Final = 1
COMPRESSION_ZSTD: Final = 1
ZSTD_LEVEL: Final = 1  # ~5x faster than zlib-1 and smaller (pitfall 6)
_HEADER: Final = struct.Struct("<8sHH16sIIIIII")
_CELL: Final = struct.Struct("<IIIIII")  # settle, finish, describe, promise, n_ids, name_len
_ID: Final = struct.Struct("<Q")
#: A wasm32 memory cannot exceed 4 GiB.
_MAX_MEMORY: Final = 1 << 32


def encode(image: VMImage, *, build_id: bytes, extra: bytes = b"") -> bytes:
    """Serialize `image` (compressed) with the cell's `extra` metadata."""
    if len(build_id) != 16:
        raise ValueError("build_id must be 16 bytes")
    header = _HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        COMPRESSION_ZSTD,
        build_id,
        len(image.memory),
        image.stack_pointer,
        image.runtime_ptr,
        image.context_ptr,
        image.scratch_ptr,
        len(extra),
    )
    body = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(image.memory)
    return b"".join((header, extra, body))


def decode(blob: bytes, *, build_id: bytes, max_memory: int = _MAX_MEMORY) -> tuple[VMImage, bytes]:
    """Parse and decompress a snapshot made by `encode`.

    Args:
        blob: The snapshot bytes.
        build_id: The running runtime's build id; a different one is rejected.
        max_memory: Refuse images whose linear memory is larger than this.

    Returns:
        The VM image and the `extra` bytes.

    Raises:
        SnapshotError: Malformed, another format version or build, or too large.
    """
    if len(blob) < _HEADER.size:
        raise SnapshotError("not a sandbox snapshot (too short)")
    magic, version, compression, snap_build, size, sp, rt, ctx, scratch, extra_len = (
        _HEADER.unpack_from(blob, 0)
    )
    if magic != MAGIC:
        raise SnapshotError("not a sandbox snapshot (bad magic)")
    if version != FORMAT_VERSION or compression != COMPRESSION_ZSTD:
        raise SnapshotError(f"unsupported snapshot format {version}/{compression}")
    if snap_build != build_id:
        raise SnapshotError("snapshot was made by a different QuickJS-WASI build")
    if size > max_memory:
        raise SnapshotError("snapshot does not fit the memory limit")
    start = _HEADER.size
    if start + extra_len > len(blob):
        raise SnapshotError("truncated snapshot")
    extra = bytes(blob[start : start + extra_len])
    try:
        memory = zstandard.ZstdDecompressor().decompress(
            blob[start + extra_len :], max_output_size=size
        )
    except zstandard.ZstdError as exc:
        raise SnapshotError(f"corrupt snapshot body: {exc}") from None
    if len(memory) != size:
        raise SnapshotError("corrupt snapshot body (size mismatch)")
    image = VMImage(
        memory=memory, stack_pointer=sp, runtime_ptr=rt, context_ptr=ctx, scratch_ptr=scratch
    )
    return image, extra


@dataclass(frozen=True, slots=True)
class CellState:
    """The cell's part of a snapshot (the `extra` blob): where its bridge lives in the heap.

    The handles are JSValue boxes in linear memory, so their addresses stay valid after a
    restore (pitfall 8); they must not be freed while the cell may still be snapshotted.

    Attributes:
        settle: The prelude's `settle` function.
        finish: The prelude's `finish` (final value -> JSON) function.
        describe: The prelude's `describe` (error -> JSON) function.
        promise: The program's result promise (0 before `run`).
        outstanding: Request ids not delivered yet.
        filename: The program's filename, for error locations.
    """

    settle: int
    finish: int
    describe: int
    promise: int
    outstanding: tuple[int, ...]
    filename: str

    def pack(self) -> bytes:
        """Serialize for `encode(..., extra=...)`."""
        name = self.filename.encode()
        handles = (self.settle, self.finish, self.describe, self.promise)
        head = _CELL.pack(*handles, len(self.outstanding), len(name))
        return head + b"".join(_ID.pack(i) for i in self.outstanding) + name

    @classmethod
    def unpack(cls, extra: bytes) -> CellState:
        """Parse `pack()` output.

        Raises:
            SnapshotError: The blob is malformed.
        """
        try:
            settle, finish, describe, promise, count, name_len = _CELL.unpack_from(extra, 0)
            ids = tuple(_ID.unpack_from(extra, _CELL.size + 8 * i)[0] for i in range(count))
            start = _CELL.size + 8 * count
            if start + name_len != len(extra):
                raise SnapshotError("corrupt snapshot metadata")
            filename = extra[start:].decode()
        except (struct.error, UnicodeDecodeError):
            raise SnapshotError("corrupt snapshot metadata") from None
        return cls(settle, finish, describe, promise, ids, filename)
