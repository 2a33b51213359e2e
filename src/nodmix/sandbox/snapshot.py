"""Snapshot wire format: a fixed header, an opaque `extra` blob, then the memory pages that
differ from the snapshot's base, zstd-compressed.

The base is the boot template the cell was copied from (named by its digest, see
`templates.py`), or a fresh instance's memory (digest all zeros) for a cell booted without one.
Restoring writes the base's pages, then these.

```
offset  size  field
0       8     magic b"NDMXQJS\\x00"
8       2     format version (2)
10      2     compression (1 = zstd; 2 = zstd with the template's pages as a dictionary)
12      16    build id: first 16 bytes of sha256(quickjs.wasm)
28      4     raw linear-memory size in bytes (a multiple of 64 KiB)
32      4     __stack_pointer
36      4     QuickJS runtime pointer
40      4     QuickJS context pointer
44      4     host scratch pointer (a small buffer the host reuses)
48      4     length of `extra`
52      32    base digest (zeros: a fresh instance's memory)
84      4     number of page runs r
88      n     extra (the cell's bridge handles, pending request ids, filename)
88+n    8r    runs: first page index, page count (4 KiB pages, ascending)
...     ...   zstd level-1 frame of those pages, in order
```

With compression 2 the frame is compressed against a raw-content dictionary: the template's own
pages with its clock- and entropy-derived bytes zeroed (`Template.dictionary`), identical in
every process that rebuilds the template. A changed page is mostly its template page, so this
makes a small snapshot about 40% smaller again.

Version 1 (a zstd frame of the whole memory after `extra`, no digest and no runs) still
decodes. The dead stack below `__stack_pointer` is never stored (nothing lives there between
calls into the VM).

Snapshots are trusted input: a crafted image cannot escape wasm, but it can forge any guest
state, and the pointers in it are handed straight back to the C layer. They are safe only
because they never leave the process and its own private state directory (code mode writes
suspended runs there, mode 0600, to survive a restart). Never accept one from a client, a
shared file or the network. The build id check rejects snapshots of
another `quickjs.wasm`; it is not an authenticity check.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

import zstandard

from nodmix.sandbox import rawpages
from nodmix.sandbox.base import SnapshotError
from nodmix.sandbox.memimage import PAGE, PageBase
from nodmix.sandbox.vmstate import VMImage, VMStart

MAGIC: Final = b"NDMXQJS\x00"
FORMAT_VERSION: Final = 2
COMPRESSION_ZSTD: Final = 1
COMPRESSION_ZSTD_TEMPLATE_DICT: Final = 2
ZSTD_LEVEL: Final = 1  # ~5x faster than zlib-1 and smaller (pitfall 6)
#: A base digest of zeros: the pages are relative to a fresh instance's memory.
FRESH_BASE: Final = bytes(32)
_PREFIX: Final = struct.Struct("<8sHH16sIIIIII")
_V2: Final = struct.Struct("<32sI")
_RUN: Final = struct.Struct("<II")
_CELL: Final = struct.Struct("<IIIIII")  # settle, finish, describe, promise, n_ids, name_len
_ID: Final = struct.Struct("<Q")
_REJECTIONS: Final = struct.Struct("<II")  # kept unhandled rejections, dropped ones
_PAIR: Final = struct.Struct("<II")  # a kept rejection: the promise's box, the reason's box
#: A wasm32 memory cannot exceed 4 GiB.
_MAX_MEMORY: Final = 1 << 32
_COMPRESSIONS: Final = (COMPRESSION_ZSTD, COMPRESSION_ZSTD_TEMPLATE_DICT)


def encode(
    image: VMImage,
    *,
    build_id: bytes,
    base: PageBase,
    base_digest: bytes = FRESH_BASE,
    forced: Collection[int] = (),
    dictionary: zstandard.ZstdCompressionDict | None = None,
    extra: bytes = b"",
) -> bytes:
    """Serialize the pages of `image` that differ from `base` (plus `forced` ones), compressed
    (against `dictionary`, the base template's, when given), with the cell's `extra` metadata."""
    if len(build_id) != 16 or len(base_digest) != 32:
        raise ValueError("build_id must be 16 bytes and base_digest 32")
    pages = base.changed(image.memory, floor=image.stack_pointer, forced=forced)
    runs: list[list[int]] = []
    for index in sorted(pages):
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1][1] += 1
        else:
            runs.append([index, 1])
    header = _PREFIX.pack(
        MAGIC,
        FORMAT_VERSION,
        COMPRESSION_ZSTD if dictionary is None else COMPRESSION_ZSTD_TEMPLATE_DICT,
        build_id,
        len(image.memory),
        image.stack_pointer,
        image.runtime_ptr,
        image.context_ptr,
        image.scratch_ptr,
        len(extra),
    ) + _V2.pack(base_digest, len(runs))
    table = b"".join(_RUN.pack(first, count) for first, count in runs)
    if dictionary is None:
        compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    else:
        compressor = zstandard.ZstdCompressor(dict_data=dictionary, level=ZSTD_LEVEL)
    raw = b"".join(pages[i] for i in sorted(pages))
    blob = b"".join((header, extra, table, compressor.compress(raw)))
    rawpages.remember(blob, raw)  # a restore from these bytes in this process skips the body
    return blob


@dataclass(frozen=True, slots=True)
class Decoded:
    """A parsed snapshot: the values outside memory, `extra`, and its (compressed) pages.

    Attributes:
        base_digest: The base template's digest, `FRESH_BASE`, or None for a version 1
            snapshot (whose `memory` is then the whole image).
        indices: The stored pages' indices, ascending (version 2).
        runs: The same as (first index, page count) runs.
        needs_dictionary: The pages were compressed against the base template's dictionary.
        raw: The pages uncompressed, when this process made these very bytes (`rawpages`).
    """

    size: int
    stack_pointer: int
    runtime_ptr: int
    context_ptr: int
    scratch_ptr: int
    extra: bytes
    base_digest: bytes | None
    indices: tuple[int, ...] = ()
    runs: tuple[tuple[int, int], ...] = ()
    body: bytes = b""
    needs_dictionary: bool = False
    memory: bytes | None = None
    raw: bytes | None = None

    def pages(self, dictionary: zstandard.ZstdCompressionDict | None = None) -> dict[int, bytes]:
        """Page index -> bytes, relative to the base.

        Raises:
            SnapshotError: Corrupt, or compressed against a dictionary that was not given.
        """
        data = self._data(dictionary)
        return {index: data[n * PAGE : (n + 1) * PAGE] for n, index in enumerate(self.indices)}

    def page_runs(
        self, dictionary: zstandard.ZstdCompressionDict | None = None
    ) -> list[tuple[int, bytes]]:
        """The stored pages as (byte offset, bytes) runs, ascending (see `pages`)."""
        data = self._data(dictionary)
        if len(self.runs) == 1:
            return [(self.runs[0][0] * PAGE, data)]
        out: list[tuple[int, bytes]] = []
        at = 0
        for first, count in self.runs:
            out.append((first * PAGE, data[at : at + count * PAGE]))
            at += count * PAGE
        return out

    def _data(self, dictionary: zstandard.ZstdCompressionDict | None) -> bytes:
        if self.needs_dictionary and dictionary is None:
            raise SnapshotError("the snapshot needs its boot template to be read")
        if self.raw is not None and len(self.raw) == len(self.indices) * PAGE:
            return self.raw
        return _decompress(
            self.body, len(self.indices) * PAGE, dictionary if self.needs_dictionary else None
        )

    def start(
        self, base: PageBase, dictionary: zstandard.ZstdCompressionDict | None = None
    ) -> VMStart | VMImage:
        """What to load into a fresh VM, given the base this snapshot names."""
        if self.memory is not None:
            return VMImage(
                self.memory,
                self.stack_pointer,
                self.runtime_ptr,
                self.context_ptr,
                self.scratch_ptr,
            )
        return VMStart(
            base.runs(self.size).layered(self.page_runs(dictionary)),
            self.stack_pointer,
            self.runtime_ptr,
            self.context_ptr,
            self.scratch_ptr,
        )


def decode(blob: bytes, *, build_id: bytes, max_memory: int = _MAX_MEMORY) -> Decoded:
    """Parse a snapshot made by `encode` (or by format version 1); version 2 pages are
    decompressed later, by `Decoded.pages` (they may need the base template's dictionary).

    Args:
        blob: The snapshot bytes.
        build_id: The running runtime's build id; a different one is rejected.
        max_memory: Refuse images whose linear memory is larger than this.

    Raises:
        SnapshotError: Malformed, another format version or build, or too large.
    """
    if len(blob) < _PREFIX.size:
        raise SnapshotError("not a sandbox snapshot (too short)")
    magic, version, compression, snap_build, size, sp, rt, ctx, scratch, extra_len = (
        _PREFIX.unpack_from(blob, 0)
    )
    if magic != MAGIC:
        raise SnapshotError("not a sandbox snapshot (bad magic)")
    known = (COMPRESSION_ZSTD,) if version == 1 else _COMPRESSIONS
    if version not in (1, FORMAT_VERSION) or compression not in known:
        raise SnapshotError(f"unsupported snapshot format {version}/{compression}")
    if snap_build != build_id:
        raise SnapshotError("snapshot was made by a different QuickJS-WASI build")
    if size > max_memory:
        raise SnapshotError("snapshot does not fit the memory limit")
    if size % PAGE:
        raise SnapshotError("corrupt snapshot image")
    if max(sp, rt, ctx, scratch) > size:  # addresses in its memory (wasm takes them as i32)
        raise SnapshotError("corrupt snapshot header")
    head = (size, sp, rt, ctx, scratch)
    if version == 1:
        extra, body = _split(blob, _PREFIX.size, extra_len, 0)
        memory = _decompress(body, size, None)
        return Decoded(*head, extra=extra, base_digest=None, memory=memory)
    if len(blob) < _PREFIX.size + _V2.size:
        raise SnapshotError("truncated snapshot")
    digest, n_runs = _V2.unpack_from(blob, _PREFIX.size)
    extra, rest = _split(blob, _PREFIX.size + _V2.size, extra_len, n_runs * _RUN.size)
    indices: list[int] = []
    runs: list[tuple[int, int]] = []
    for i in range(n_runs):
        first, count = _RUN.unpack_from(rest, i * _RUN.size)
        if (indices and first <= indices[-1]) or (first + count) * PAGE > size:
            raise SnapshotError("corrupt snapshot page table")
        indices.extend(range(first, first + count))
        runs.append((first, count))
    needs = compression == COMPRESSION_ZSTD_TEMPLATE_DICT
    if needs and digest == FRESH_BASE:
        raise SnapshotError("corrupt snapshot header")
    return Decoded(
        *head,
        extra=extra,
        base_digest=digest,
        indices=tuple(indices),
        runs=tuple(runs),
        body=bytes(rest[n_runs * _RUN.size :]),
        needs_dictionary=needs,
        raw=rawpages.take(blob),
    )


def _split(blob: bytes, start: int, extra_len: int, table_len: int) -> tuple[bytes, bytes]:
    if start + extra_len + table_len > len(blob):
        raise SnapshotError("truncated snapshot")
    return bytes(blob[start : start + extra_len]), blob[start + extra_len :]


def _decompress(body: bytes, size: int, dictionary: zstandard.ZstdCompressionDict | None) -> bytes:
    # `max_output_size` bounds only frames that do not state their size: a frame that states
    # one is inflated to it whatever it is, so a few bytes could claim gigabytes.
    try:
        stated = zstandard.get_frame_parameters(body).content_size
    except zstandard.ZstdError as exc:
        raise SnapshotError(f"corrupt snapshot body: {exc}") from None
    if stated not in (size, zstandard.CONTENTSIZE_UNKNOWN):
        raise SnapshotError("corrupt snapshot body (size mismatch)")
    try:
        data = _decompressor(dictionary).decompress(body, max_output_size=size)
    except zstandard.ZstdError as exc:
        _local.last = None  # start the next one from a fresh decompressor
        raise SnapshotError(f"corrupt snapshot body: {exc}") from None
    if len(data) != size:
        raise SnapshotError("corrupt snapshot body (size mismatch)")
    return data


class _Local(threading.local):
    last: tuple[zstandard.ZstdCompressionDict | None, zstandard.ZstdDecompressor] | None = None


_local = _Local()


def _decompressor(dictionary: zstandard.ZstdCompressionDict | None) -> zstandard.ZstdDecompressor:
    # One per thread (a decompressor is not thread-safe), kept for the dictionary last used:
    # restores from one template's snapshots skip loading its dictionary each time.
    last = _local.last
    if last is not None and last[0] is dictionary:
        return last[1]
    if dictionary is None:
        decompressor = zstandard.ZstdDecompressor()
    else:
        decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
    _local.last = (dictionary, decompressor)
    return decompressor


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
        rejections: Unhandled promise rejections so far, as (promise box, reason box).
        rejections_dropped: Unhandled rejections past the kept ones, only counted.
    """

    settle: int
    finish: int
    describe: int
    promise: int
    outstanding: tuple[int, ...]
    filename: str
    rejections: tuple[tuple[int, int], ...] = ()
    rejections_dropped: int = 0

    def pack(self) -> bytes:
        """Serialize for `encode(..., extra=...)`."""
        name = self.filename.encode()
        handles = (self.settle, self.finish, self.describe, self.promise)
        head = _CELL.pack(*handles, len(self.outstanding), len(name))
        packed = head + b"".join(_ID.pack(i) for i in self.outstanding) + name
        if self.rejections or self.rejections_dropped:  # (absent in most snapshots)
            packed += _REJECTIONS.pack(len(self.rejections), self.rejections_dropped)
            packed += b"".join(_PAIR.pack(*pair) for pair in self.rejections)
        return packed

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
            end = start + name_len
            if end > len(extra):
                raise SnapshotError("corrupt snapshot metadata")
            filename = extra[start:end].decode()
            pairs: tuple[tuple[int, int], ...] = ()
            dropped = 0
            if end < len(extra):
                kept, dropped = _REJECTIONS.unpack_from(extra, end)
                first = end + _REJECTIONS.size
                if first + _PAIR.size * kept != len(extra):
                    raise SnapshotError("corrupt snapshot metadata")
                pairs = tuple(_PAIR.unpack_from(extra, first + _PAIR.size * i) for i in range(kept))
        except (struct.error, UnicodeDecodeError):
            raise SnapshotError("corrupt snapshot metadata") from None
        return cls(settle, finish, describe, promise, ids, filename, pairs, dropped)
