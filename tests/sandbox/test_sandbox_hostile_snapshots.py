"""Crafted snapshots (a damaged or planted run file) are refused without the host reading,
writing or allocating beyond what the snapshot's own header allows."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import zstandard

from nodmix.sandbox import Cell, Pending, QuickJSRuntime, SnapshotError
from nodmix.sandbox import snapshot as snapshot_format

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration

#: What a crafted body claims to inflate to: far more than any snapshot's pages.
_BOMB_BYTES = 96 << 20


def _suspended_blob(boot: Callable[..., Cell]) -> bytes:
    cell = boot()
    outcome = cell.run("globalThis.kept = [1, 2, 3]; await host.request('wait', 1)")
    assert isinstance(outcome, Pending)
    blob = cell.snapshot()
    cell.close()
    return blob


def _with_body(blob: bytes, body: bytes) -> bytes:
    """`blob` with its compressed pages replaced by `body` (compressed without a dictionary)."""
    extra_len = struct.unpack_from("<I", blob, 48)[0]
    n_runs = struct.unpack_from("<I", blob, 84)[0]
    start = 88 + extra_len + 8 * n_runs
    head = bytearray(blob[:start])
    struct.pack_into("<H", head, 10, snapshot_format.COMPRESSION_ZSTD)
    return bytes(head) + body


def _peak_while(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
    except SnapshotError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_a_body_that_inflates_past_its_pages_is_refused_before_it_is_inflated(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    bomb = zstandard.ZstdCompressor(level=1).compress(bytes(_BOMB_BYTES))
    crafted = _with_body(_suspended_blob(boot), bomb)
    assert len(crafted) < 64 << 10

    with pytest.raises(SnapshotError, match="corrupt snapshot body"):
        Cell.restore(crafted, recorder, runtime=runtime)
    peak = _peak_while(lambda: Cell.restore(crafted, recorder, runtime=runtime))
    assert peak < _BOMB_BYTES // 4


def test_a_version_1_body_that_inflates_past_the_image_is_refused_before_it_is_inflated(
    runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    bomb = zstandard.ZstdCompressor(level=1).compress(bytes(_BOMB_BYTES))
    header = struct.pack(
        "<8sHH16sIIIIII", b"NDMXQJS\x00", 1, 1, runtime.build_id, 1 << 20, 0, 0, 0, 0, 0
    )
    crafted = header + bomb

    with pytest.raises(SnapshotError, match="corrupt snapshot body"):
        Cell.restore(crafted, recorder, runtime=runtime)
    peak = _peak_while(lambda: Cell.restore(crafted, recorder, runtime=runtime))
    assert peak < _BOMB_BYTES // 4


def test_a_body_whose_frame_claims_a_terabyte_is_refused_as_corrupt(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    # A zstd frame header (single segment, 8-byte content size) claiming 1 TiB, then one
    # 1-byte RLE block: the frame never says how it ends.
    frame = struct.pack("<IBQ", 0xFD2FB528, 0xE0, 1 << 40) + bytes((0x0A, 0, 0, 0))
    crafted = _with_body(_suspended_blob(boot), frame)
    with pytest.raises(SnapshotError, match="corrupt snapshot body"):
        Cell.restore(crafted, recorder, runtime=runtime)


@pytest.mark.parametrize(
    "offset",
    [32, 36, 40, 88, 92, 96, 100],
    ids=["stack", "runtime", "context", "settle", "finish", "describe", "promise"],
)
def test_a_pointer_past_the_snapshots_memory_is_refused_as_corrupt(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder, offset: int
) -> None:
    crafted = bytearray(_suspended_blob(boot))
    struct.pack_into("<I", crafted, offset, 0x8000_0010)
    with pytest.raises(SnapshotError, match="corrupt snapshot"):
        Cell.restore(bytes(crafted), recorder, runtime=runtime)
