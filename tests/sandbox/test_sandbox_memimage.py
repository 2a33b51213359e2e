"""Restoring writes only the pages that differ from a fresh instance: the result is the image."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nodmix.sandbox import Cell, Pending, QuickJSRuntime, SandboxLimits
from nodmix.sandbox import snapshot as snapshot_format
from nodmix.sandbox.memimage import PAGE, PageRuns, fresh_memory
from nodmix.sandbox.vm import VM

pytestmark = pytest.mark.integration


def test_a_restored_vm_holds_the_snapshot_image_byte_for_byte(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    cell = boot()
    outcome = cell.run("const big = 'x'.repeat(300000); await host.request('wait', 1); return 1")
    assert isinstance(outcome, Pending)
    image, _ = snapshot_format.decode(cell.snapshot(), build_id=runtime.build_id)
    cell.close()

    vm = VM(runtime, SandboxLimits(), image)
    try:
        base, size = vm.mem.bounds()
        assert size == len(image.memory)
        assert vm.mem.read(0, size) == bytes(image.memory)
    finally:
        vm.close()


def test_only_pages_that_differ_from_a_fresh_instance_are_kept(runtime: QuickJSRuntime) -> None:
    fresh = fresh_memory(runtime)
    image = bytearray(fresh) + bytes(4 * PAGE)
    image[PAGE + 5] ^= 0xFF
    image[len(fresh) + 2 * PAGE] = 7

    runs = PageRuns.diff(bytes(image), fresh)

    assert [offset for offset, _ in runs.runs] == [PAGE, len(fresh) + 2 * PAGE]
    assert runs.changed_bytes == 2 * PAGE
    assert runs.size == len(image)
