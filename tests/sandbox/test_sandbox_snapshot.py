"""Snapshot and restore of suspended cells."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import zstandard

from nodmix.errors import SandboxError
from nodmix.sandbox import Cell, Completed, Pending, QuickJSRuntime, SandboxLimits, SnapshotError
from nodmix.sandbox import snapshot as snapshot_format

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration

PROGRAM = """
let counter = 0;
const bump = () => ++counter;
bump();
const first = await host.request('fetch', {page: 1});
const log = [];
log.push('after first: ' + first.items.length);
bump();
let failure = null;
try { await host.request('fetch', {page: 2}); } catch (e) { failure = e.message; }
log.push(host.call('echo', 'after restore'));
return { counter: bump(), first, failure, log };
"""


def suspended(boot: Callable[..., Cell]) -> tuple[Cell, int]:
    cell = boot()
    outcome = cell.run(PROGRAM)
    assert isinstance(outcome, Pending)
    return cell, outcome.request_ids[0]


def test_a_restored_cell_resumes_with_its_closures_and_produces_new_output(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell, first_id = suspended(boot)
    blob = cell.snapshot()
    del cell

    restored = Cell.restore(blob, recorder, runtime=runtime)
    assert restored.outstanding == (first_id,)
    restored.deliver(first_id, True, '{"items": [1, 2, 3]}')
    outcome = restored.pump()
    assert isinstance(outcome, Pending)

    again = Cell.restore(restored.snapshot(), recorder, runtime=runtime)
    again.deliver(outcome.request_ids[0], False, "page 2 is gone")
    final = again.pump()
    assert isinstance(final, Completed)
    assert final.value() == {
        "counter": 3,
        "first": {"items": [1, 2, 3]},
        "failure": "page 2 is gone",
        "log": ["after first: 3", "after restore"],
    }
    assert recorder.seen_calls == [("echo", '"after restore"')]


def test_a_small_suspended_cell_snapshot_is_compact(boot: Callable[..., Cell]) -> None:
    cell, _ = suspended(boot)
    assert len(cell.snapshot()) < 256 * 1024


def test_a_snapshot_holds_no_source_text_of_the_prelude_or_the_setup_script(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    boot().close()  # the first cell of a process compiles the scripts; later ones load bytecode
    cell, _ = suspended(boot)
    # A snapshot stores only the pages that differ from the cell's boot template, so look at the
    # whole linear memory the snapshot stands for: the live VM's.
    memory = bytes(cell._vm.capture().memory)
    assert b"function checkedStringify(value, transform)" not in memory  # the prelude
    assert b"const parse = JSON.parse, stringify = JSON.stringify" not in memory  # the setup
    shown = boot().run("return host.call.toString()")
    assert isinstance(shown, Completed) and "[native code]" in str(shown.value())


def test_a_snapshot_from_another_build_is_rejected(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell, _ = suspended(boot)
    blob = bytearray(cell.snapshot())
    blob[12] ^= 0xFF  # the build id starts at offset 12
    with pytest.raises(SnapshotError, match="different QuickJS-WASI build"):
        Cell.restore(bytes(blob), recorder, runtime=runtime)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b[:20],
        lambda b: b"XXXXXXXX" + b[8:],
        lambda b: b[:60] + b"\0" * 100 + b[160:],
        lambda b: b[:-100],
    ],
)
def test_a_corrupt_snapshot_is_rejected(
    boot: Callable[..., Cell],
    runtime: QuickJSRuntime,
    recorder: Recorder,
    mangle: Callable[[bytes], bytes],
) -> None:
    cell, _ = suspended(boot)
    with pytest.raises(SnapshotError):
        Cell.restore(mangle(cell.snapshot()), recorder, runtime=runtime)


def test_a_snapshot_larger_than_the_new_memory_limit_is_refused(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell = boot(memory_bytes=64 << 20)
    outcome = cell.run("globalThis.keep = 'x'.repeat(12 << 20); await host.request('wait', 1)")
    assert isinstance(outcome, Pending)
    blob = cell.snapshot()
    small = SandboxLimits(memory_bytes=4 << 20, memory_headroom_bytes=1 << 20)
    with pytest.raises(SnapshotError, match="memory limit"):
        Cell.restore(blob, recorder, limits=small, runtime=runtime)


def test_limits_are_applied_fresh_on_restore(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell = boot(timeout=10)
    outcome = cell.run("await host.request('wait', 1); while (true) {}")
    assert isinstance(outcome, Pending)
    restored = Cell.restore(
        cell.snapshot(), recorder, limits=SandboxLimits(timeout=0.2), runtime=runtime
    )
    restored.deliver(outcome.request_ids[0], True, "1")
    final = restored.pump()
    assert final.kind.value == "timeout"  # type: ignore[union-attr]
    assert restored.elapsed < 1.0


def test_a_finished_cell_cannot_be_snapshotted(boot: Callable[..., Cell]) -> None:
    cell = boot()
    cell.run("return 1")
    with pytest.raises(SandboxError):
        cell.snapshot()


def test_a_booted_template_can_be_snapshotted_and_run_after_restore(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    template = boot().snapshot()
    assert Cell.restore(template, recorder, runtime=runtime).run("return 7") == Completed("7")


def test_snapshot_header_records_the_build_and_memory_size(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    cell, _ = suspended(boot)
    decoded = snapshot_format.decode(cell.snapshot(), build_id=runtime.build_id)
    assert decoded.size % 65536 == 0
    assert decoded.runtime_ptr and decoded.context_ptr and decoded.stack_pointer
    assert decoded.extra.endswith(b"cell.js")


def test_a_snapshot_restores_in_another_process_onto_a_rebuilt_template(
    boot: Callable[..., Cell], setup_script: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    cell, first_id = suspended(boot)
    path = tmp_path / "cell.snap"
    path.write_bytes(cell.snapshot())
    script = textwrap.dedent(
        f"""
        from nodmix.sandbox import Cell, SnapshotError

        class Handler:
            def on_call(self, op, payload):
                return payload
            def on_request(self, request_id, op, payload):
                return (False, "no page 2")

        blob = open({str(path)!r}, "rb").read()
        try:
            Cell.restore(blob, Handler())
        except SnapshotError as exc:
            print("without setup:", exc)
        cell = Cell.restore(blob, Handler(), setup_script={setup_script!r})
        cell.deliver({first_id}, True, '{{"items": []}}')
        print(cell.pump().value_json)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "without setup: the snapshot is stored relative to a boot template" in result.stdout
    assert '"failure":"no page 2"' in result.stdout
    assert '"counter":3' in result.stdout


def test_a_snapshot_onto_a_template_whose_setup_changed_fails_clearly(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell, _ = suspended(boot)
    decoded = snapshot_format.decode(cell.snapshot(), build_id=runtime.build_id)
    blob = bytearray(cell.snapshot())
    blob[52:84] = bytes(31) + b"\x01"  # a template this process never built
    assert decoded.base_digest != bytes(blob[52:84])
    with pytest.raises(SnapshotError, match="cannot be rebuilt"):
        Cell.restore(bytes(blob), recorder, runtime=runtime, setup_script="(cap) => {}")


def test_a_version_1_snapshot_still_restores(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell, first_id = suspended(boot)
    with cell._vm.entry(1):
        image = cell._vm.capture()
        memory = bytes(image.memory)
        head = (image.stack_pointer, image.runtime_ptr, image.context_ptr, image.scratch_ptr)
    extra = snapshot_format.CellState(
        cell._settle, cell._finish, cell._describe, cell._promise, (first_id,), "cell.js"
    ).pack()
    # The version 1 layout: header, extra, then a zstd frame of the whole memory.
    header = struct.pack(
        "<8sHH16sIIIIII", b"NDMXQJS\x00", 1, 1, runtime.build_id, len(memory), *head, len(extra)
    )
    blob = header + extra + zstandard.ZstdCompressor(level=1).compress(memory)
    cell.close()

    restored = Cell.restore(blob, recorder, runtime=runtime)
    restored.deliver(first_id, True, '{"items": [1]}')
    outcome = restored.pump()
    assert isinstance(outcome, Pending)
    restored.deliver(outcome.request_ids[0], False, "gone")
    final = restored.pump()
    assert isinstance(final, Completed)
    assert final.value()["counter"] == 3


UNHANDLED = """
Promise.reject(new Error('left alone'));
const late = Promise.reject(new Error('handled after the restore'));
await host.request('fetch', {page: 1});
late.catch(() => null);
return 'done';
"""


def test_unhandled_rejections_survive_a_snapshot_and_late_handlers_clear_them(
    boot: Callable[..., Cell], runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell = boot()
    outcome = cell.run(UNHANDLED)
    assert isinstance(outcome, Pending)
    blob = cell.snapshot()
    cell.close()
    state = snapshot_format.CellState.unpack(
        snapshot_format.decode(blob, build_id=runtime.build_id).extra
    )
    assert len(state.rejections) == 2 and state.rejections_dropped == 0
    assert snapshot_format.CellState.unpack(state.pack()) == state

    restored = Cell.restore(blob, recorder, runtime=runtime)
    restored.deliver(outcome.request_ids[0], True, "{}")
    final = restored.pump()
    assert isinstance(final, Completed) and final.value() == "done"
    assert final.unhandled == ("Error: left alone (at cell.js:2:20)",)


def test_cell_state_without_rejections_keeps_the_earlier_layout() -> None:
    state = snapshot_format.CellState(1, 2, 3, 4, (7,), "cell.js")
    assert snapshot_format.CellState.unpack(state.pack()) == state
    assert len(state.pack()) == 24 + 8 + len("cell.js")
    with pytest.raises(SnapshotError):
        snapshot_format.CellState.unpack(state.pack() + b"\x01\x00\x00\x00\x00\x00\x00\x00")
