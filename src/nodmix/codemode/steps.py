"""Worker steps of the code-mode engine: running guest code off the event loop, interruptibly.

Each step (boot and run, deliver and pump, restore and pump, snapshot) runs in a sandbox worker
thread. A worker thread cannot be abandoned, so an aborted turn interrupts the cell instead of
waiting out the guest's budget.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import anyio.lowlevel

from nodmix.codemode.bridge import StepHandler
from nodmix.codemode.client_calls import only_client_calls_pending
from nodmix.codemode.guest import SETUP_SCRIPT
from nodmix.codemode.handoff import Delivery, Handoff
from nodmix.codemode.runs import RunState, Settled
from nodmix.codemode.settings import CodeModeSettings
from nodmix.sandbox import Outcome, SandboxLimits

CELL_FILENAME = "cell.js"


def debug_enabled() -> bool:
    """`NODMIX_DEBUG_CODE_MODE=1`."""
    return os.environ.get("NODMIX_DEBUG_CODE_MODE", "") not in ("", "0", "false")


def limits_for(settings: CodeModeSettings) -> SandboxLimits:
    return SandboxLimits(
        timeout=settings.timeout_ms / 1000, memory_bytes=settings.memory_limit_bytes
    )


def _idle(state: RunState) -> bool:
    return not state.calls and not state.timers.active


def _any_settled(state: RunState) -> bool:
    return any(c.done.is_set() for c in state.calls.values()) or state.timers.any_settled()


def _nothing_to_wait_for(state: RunState, stop_on_approval: bool) -> bool:
    """No timer is armed and every running call waits on someone outside this step: client
    results come with a later request, and approvals (with `stop_on_approval`) with a person."""
    if state.timers.active or not state.calls:
        return False
    if only_client_calls_pending(state):
        return True
    return stop_on_approval and all(c.awaiting_approval for c in state.calls.values())


async def settled_by(
    state: RunState, deadline: float, *, stop_on_approval: bool = False
) -> list[Settled]:
    """Nested calls and timers that have settled, waiting until at least one has or the
    deadline passes (or until nothing left can settle within this step)."""
    # Fast tools usually finish within a scheduler pass or two of being dispatched; checking
    # again after a couple of checkpoints avoids arming an event and a timeout for each call.
    for _ in range(2):
        if _idle(state) or _any_settled(state):
            break
        await anyio.lowlevel.checkpoint()
    while True:
        settled = state.settled()
        if settled or _idle(state) or _nothing_to_wait_for(state, stop_on_approval):
            return settled
        state.changed = anyio.Event()
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            return []
        with anyio.move_on_after(remaining):
            await state.changed.wait()


async def in_worker(fn: Any, *args: Any) -> Any:
    from nodmix.sandbox import run_in_worker

    return await run_in_worker(fn, *args)


class CellRef:
    """The cell a worker step runs, shared with the event loop so an abort can interrupt it.

    The worker sets `cell` as soon as the VM exists and then checks `aborted`; the loop sets
    `aborted` and then interrupts `cell` if it is set. Either order, the guest gets stopped.
    """

    __slots__ = ("aborted", "cell", "handoff")

    def __init__(self, cell: Any = None, handoff: Handoff | None = None) -> None:
        self.cell = cell
        self.handoff = handoff
        self.aborted = False

    def attach(self, cell: Any) -> None:
        self.cell = cell
        if self.aborted:
            cell.interrupt()

    def abort(self) -> None:
        self.aborted = True
        if self.handoff is not None:
            self.handoff.cancel()
        if self.cell is not None:
            self.cell.interrupt()


async def guest_step(ref: CellRef, fn: Any, *args: Any) -> Any:
    """Run one worker step (`fn(*args)` in a worker thread), interruptibly.

    A worker thread cannot be abandoned (the VM would be shared by two threads), so cancelling
    the awaiting task alone would wait until the guest used up its whole budget: an aborted turn
    stuck in `while (true) {}` would hang for `timeoutMs`. On cancellation the guest is
    interrupted instead, the worker returns at once and the cancellation proceeds.
    """
    from nodmix.sandbox import run_in_worker

    return await run_in_worker(fn, *args, on_cancel=ref.abort)


def boot_and_run(
    ref: CellRef, handler: StepHandler, limits: SandboxLimits, source: str, wrapped: bool
) -> Outcome:
    """Boot a cell (it becomes `ref.cell`) and run the program."""
    from nodmix.sandbox import Cell

    cell = Cell.boot(SETUP_SCRIPT, handler, limits=limits)
    ref.attach(cell)
    return _fast(ref, cell, cell.run(source, filename=CELL_FILENAME, wrapped=wrapped))


def deliver_and_pump(cell: Any, items: list[Delivery]) -> Outcome:
    return cell.resume(items)  # type: ignore[no-any-return]


def deliver_and_drive(ref: CellRef, cell: Any, items: list[Delivery]) -> Outcome:
    """Deliver, pump, and keep going through the fast lane while calls settle quickly."""
    return _fast(ref, cell, deliver_and_pump(cell, items))


def _fast(ref: CellRef, cell: Any, outcome: Outcome) -> Outcome:
    if ref.handoff is None:
        return outcome
    return ref.handoff.drive(cell, outcome, deliver_and_pump)


def snapshot_and_close(cell: Any) -> bytes:
    """Snapshot a suspended cell and free its VM (the run continues from the snapshot)."""
    try:
        return cell.snapshot()  # type: ignore[no-any-return]
    finally:
        cell.close()


def restore_and_pump(
    ref: CellRef,
    blob: bytes,
    handler: StepHandler,
    limits: SandboxLimits,
    items: list[Delivery],
) -> Outcome:
    """Restore a cell (it becomes `ref.cell`) and deliver `items`."""
    from nodmix.sandbox import Cell

    cell = Cell.restore(blob, handler, limits=limits, setup_script=SETUP_SCRIPT)
    ref.attach(cell)
    return deliver_and_drive(ref, cell, items)


async def step(ref: CellRef, state: RunState, fn: Any, *args: Any) -> Any:
    """A worker step (`guest_step`); when it ends, however it ends, the quick calls it ran are
    published before anything else looks at the run (the outcome, a cancellation's cleanup)."""
    try:
        return await guest_step(ref, fn, *args)
    finally:
        state.handoff = None
        if ref.handoff is not None and ref.handoff.quick is not None:
            ref.handoff.quick.publish()


def raise_step_error(handoff: Handoff | None) -> None:
    """Re-raise what dispatching or delivering (or publishing quick calls) raised on the loop
    during a fast-lane step."""
    if handoff is None:
        return
    if handoff.error is not None:
        raise handoff.error
    if handoff.quick is not None and handoff.quick.error is not None:
        raise handoff.quick.error
