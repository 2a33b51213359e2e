"""The event-loop facade: guests run in worker threads and never stall the loop."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from nodmix.sandbox import (
    AsyncCell,
    Completed,
    Failed,
    FailureKind,
    Pending,
    QuickJSRuntime,
    SandboxLimits,
    templates,
)

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_a_spinning_guest_does_not_block_the_event_loop(
    runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    # A guest that held the event loop would show one gap as long as its whole budget (1.5 s).
    cell = await AsyncCell.boot(None, recorder, limits=SandboxLimits(timeout=1.5), runtime=runtime)
    ticks = 0
    worst_gap = 0.0
    finished = anyio.Event()

    async def heartbeat() -> None:
        nonlocal ticks, worst_gap
        last = time.monotonic()
        while not finished.is_set():
            await anyio.sleep(0.01)
            now = time.monotonic()
            worst_gap = max(worst_gap, now - last)
            last = now
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        outcome = await cell.run("while (true) {}")
        finished.set()

    assert isinstance(outcome, Failed) and outcome.kind is FailureKind.TIMEOUT
    assert ticks >= 20
    assert worst_gap < 0.75


async def test_an_async_cell_suspends_snapshots_and_resumes(
    runtime: QuickJSRuntime, recorder: Recorder, setup_script: str
) -> None:
    cell = await AsyncCell.boot(setup_script, recorder, runtime=runtime)
    outcome = await cell.run("const v = await host.request('slow', 1); return v + 1")
    assert isinstance(outcome, Pending)
    blob = await cell.snapshot()
    templates.clear()  # as in a new process: the boot template is rebuilt from the setup
    resumed = await AsyncCell.restore(blob, recorder, runtime=runtime, setup_script=setup_script)
    await resumed.deliver(outcome.request_ids[0], True, "41")
    assert await resumed.pump() == Completed("42")


async def test_two_guests_run_concurrently_in_separate_threads(
    runtime: QuickJSRuntime, recorder: Recorder, setup_script: str
) -> None:
    # Each guest reports the host clock when it starts spinning. Run one after the other, the
    # second could only start once the first had used its whole budget.
    budget = 1.0
    limits = SandboxLimits(timeout=budget)
    cells = [
        await AsyncCell.boot(setup_script, recorder, limits=limits, runtime=runtime)
        for _ in range(2)
    ]
    results: list[Failed] = []

    async def spin(cell: AsyncCell) -> None:
        outcome = await cell.run("host.call('started', Date.now()); while (true) {}")
        assert isinstance(outcome, Failed)
        results.append(outcome)

    async with anyio.create_task_group() as group:
        for cell in cells:
            group.start_soon(spin, cell)
    assert [r.kind for r in results] == [FailureKind.TIMEOUT] * 2
    starts = sorted(float(payload) for op, payload in recorder.seen_calls if op == "started")
    assert len(starts) == 2
    assert starts[1] - starts[0] < budget * 1000  # the second began while the first still ran


async def test_interrupt_stops_a_guest_awaited_on_the_loop(
    runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell = await AsyncCell.boot(None, recorder, limits=SandboxLimits(timeout=30), runtime=runtime)
    outcome: Failed | None = None

    async def run() -> None:
        nonlocal outcome
        result = await cell.run("while (true) {}")
        assert isinstance(result, Failed)
        outcome = result

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.sleep(0.1)
        cell.interrupt()
    assert outcome is not None and outcome.kind is FailureKind.ABORTED


def test_a_wakeup_set_before_the_wait_is_not_lost_and_is_consumed_by_it() -> None:
    from nodmix.sandbox.threads import Wakeup

    wakeup = Wakeup()
    assert not wakeup.wait(0.0)
    wakeup.set()
    wakeup.set()  # twice is the same as once
    assert wakeup.wait(0.0)
    assert not wakeup.wait(0.0)  # consumed
    wakeup.set()
    wakeup.clear()
    assert not wakeup.wait(0.0)


def test_a_wakeup_set_from_another_thread_wakes_the_waiter() -> None:
    import threading

    from nodmix.sandbox.threads import Wakeup

    wakeup = Wakeup()
    setter = threading.Thread(target=wakeup.set)
    setter.start()
    assert wakeup.wait(10.0)
    setter.join()


def test_cpu_slots_let_only_count_holders_in_at_once() -> None:
    import threading

    from nodmix.sandbox.threads import CpuSlots

    slots = CpuSlots(1)
    slots.acquire()
    entered = threading.Event()

    def second() -> None:
        slots.acquire()
        entered.set()
        slots.release()

    thread = threading.Thread(target=second)
    thread.start()
    assert not entered.wait(0.05)  # held: the second holder waits
    slots.release()
    assert entered.wait(10.0)
    thread.join()
