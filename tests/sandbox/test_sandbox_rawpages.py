"""A restore from the very snapshot bytes this process made reuses the pages it compressed;
any other bytes (a copy read back from a run file) are decompressed, to the same pages."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from nodmix.sandbox import Cell, Completed, Pending, QuickJSRuntime, rawpages, templates
from nodmix.sandbox import snapshot as snapshot_format

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration


def test_the_bytes_this_process_made_give_back_their_pages_once(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    cell = boot()
    assert isinstance(cell.run("await host.request('wait', 1); return 2"), Pending)
    blob = cell.snapshot()
    cell.close()
    copy = bytes(bytearray(blob))

    first = snapshot_format.decode(blob, build_id=runtime.build_id)
    again = snapshot_format.decode(blob, build_id=runtime.build_id)
    read_back = snapshot_format.decode(copy, build_id=runtime.build_id)

    template = templates.find(first.base_digest or b"")
    assert template is not None
    assert first.raw is not None
    assert again.raw is None and read_back.raw is None
    assert first.pages(template.dictionary) == read_back.pages(template.dictionary)


@pytest.mark.parametrize("bytes_of", [lambda b: b, lambda b: bytes(bytearray(b))])
def test_a_run_completes_from_its_snapshot_or_a_copy_of_it(
    boot: Callable[..., Cell],
    runtime: QuickJSRuntime,
    recorder: Recorder,
    bytes_of: Callable[[bytes], bytes],
) -> None:
    cell = boot()
    outcome = cell.run("const x = await host.request('wait', 1); return [x, 'done']")
    assert isinstance(outcome, Pending)
    blob = bytes_of(cell.snapshot())
    cell.close()

    restored = Cell.restore(blob, recorder, runtime=runtime)
    restored.deliver(outcome.request_ids[0], True, "41")
    final = restored.pump()

    assert isinstance(final, Completed)
    assert final.value() == [41, "done"]


def test_kept_pages_are_bounded_in_entries_and_bytes() -> None:
    blobs = [bytes([i]) * 16 for i in range(rawpages.MAX_ENTRIES + 3)]
    for blob in blobs:
        rawpages.remember(blob, b"p" * 64)
    too_big = b"big snapshot"
    rawpages.remember(too_big, bytes(rawpages.MAX_BYTES // 2 + 1))

    assert rawpages.take(too_big) is None
    assert [rawpages.take(b) is not None for b in blobs[:3]] == [False, False, False]
    assert all(rawpages.take(b) == b"p" * 64 for b in blobs[3:])
