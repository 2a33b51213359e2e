"""Restoring writes only the pages that differ from the base (a fresh instance's memory or the
boot template's): the result is the snapshotted memory."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import pytest

from nodmix.sandbox import Cell, Pending, QuickJSRuntime, SandboxLimits, templates
from nodmix.sandbox import snapshot as snapshot_format
from nodmix.sandbox.memimage import PAGE, PageBase, PageRuns, fresh_memory
from nodmix.sandbox.vm import VM

pytestmark = pytest.mark.integration


def test_a_restored_vm_holds_the_snapshotted_memory_byte_for_byte(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    cell = boot()
    outcome = cell.run("const big = 'x'.repeat(300000); await host.request('wait', 1); return 1")
    assert isinstance(outcome, Pending)
    with cell._vm.entry(1):
        live = cell._vm.capture()
        memory, sp = bytes(live.memory), live.stack_pointer
    decoded = snapshot_format.decode(cell.snapshot(), build_id=runtime.build_id)
    cell.close()
    template = templates.find(decoded.base_digest or b"")
    assert template is not None

    vm = VM(runtime, SandboxLimits(), decoded.start(template.base, template.dictionary))
    try:
        _, size = vm.mem.bounds()
        assert size == len(memory)
        # Everything but the dead stack below the resting stack pointer.
        assert vm.mem.read(sp, size - sp) == memory[sp:]
    finally:
        vm.close()


def test_a_snapshot_stores_only_the_pages_that_differ_from_its_template(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    cell = boot()
    outcome = cell.run("globalThis.big = 'y'.repeat(200000); await host.request('wait', 1)")
    assert isinstance(outcome, Pending)
    decoded = snapshot_format.decode(cell.snapshot(), build_id=runtime.build_id)
    template = templates.find(decoded.base_digest or b"")
    assert template is not None
    pages = decoded.pages(template.dictionary)
    assert template.forced <= pages.keys()  # clock-derived pages are always stored
    for index, page in pages.items():
        assert index in template.forced or page != bytes(template.base.page(index))
    assert len(pages) * PAGE < decoded.size // 2


def test_only_pages_that_differ_from_a_fresh_instance_are_kept(runtime: QuickJSRuntime) -> None:
    fresh = fresh_memory(runtime)
    image = bytearray(fresh) + bytes(4 * PAGE)
    image[PAGE + 5] ^= 0xFF
    image[len(fresh) + 2 * PAGE] = 7

    runs = PageRuns.diff(bytes(image), fresh)

    assert [offset for offset, _ in runs.runs] == [PAGE, len(fresh) + 2 * PAGE]
    assert runs.changed_bytes == 2 * PAGE
    assert runs.size == len(image)


def test_a_base_overlays_its_own_pages_on_a_fresh_instance(runtime: QuickJSRuntime) -> None:
    fresh = fresh_memory(runtime)
    own = {1: b"\x01" * PAGE}
    base = PageBase(fresh, own)
    image = bytearray(fresh)
    image[PAGE : 2 * PAGE] = own[1]
    image[3 * PAGE] ^= 0xFF

    assert base.changed(bytes(image)) == {3: bytes(image[3 * PAGE : 4 * PAGE])}
    assert base.changed(bytes(image), forced={1}).keys() == {1, 3}
    assert base.changed(bytes(image), floor=4 * PAGE) == {}
    runs = base.runs_with({5: b"\x05" * PAGE}, len(fresh))
    assert [offset for offset, _ in runs.runs] == [PAGE, 5 * PAGE]


def test_runs_laid_over_earlier_ones_win_where_they_overlap() -> None:
    size = 4 * PAGE
    runs = PageRuns([(0, b"\x01" * (3 * PAGE))], size).layered([(PAGE, b"\x02" * PAGE)])
    memory = (ctypes.c_char * size)()

    runs.write(ctypes.addressof(memory), size)

    assert bytes(memory) == b"\x01" * PAGE + b"\x02" * PAGE + b"\x01" * PAGE + bytes(PAGE)


def test_a_base_gives_only_its_pages_below_the_size_asked_for(runtime: QuickJSRuntime) -> None:
    fresh = fresh_memory(runtime)
    base = PageBase(fresh, {1: b"\x01" * PAGE, 2: b"\x02" * PAGE, 6: b"\x06" * PAGE})

    whole = base.runs(8 * PAGE)
    cut = base.runs(2 * PAGE)

    assert [(offset, len(chunk)) for offset, chunk in whole.runs] == [
        (PAGE, 2 * PAGE),
        (6 * PAGE, PAGE),
    ]
    assert [(offset, chunk) for offset, chunk in cut.runs] == [(PAGE, b"\x01" * PAGE)]
    assert cut.size == 2 * PAGE
