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
)

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_a_spinning_guest_does_not_block_the_event_loop(
    runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    cell = await AsyncCell.boot(None, recorder, limits=SandboxLimits(timeout=0.6), runtime=runtime)
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
    assert worst_gap < 0.2


async def test_an_async_cell_suspends_snapshots_and_resumes(
    runtime: QuickJSRuntime, recorder: Recorder, setup_script: str
) -> None:
    cell = await AsyncCell.boot(setup_script, recorder, runtime=runtime)
    outcome = await cell.run("const v = await host.request('slow', 1); return v + 1")
    assert isinstance(outcome, Pending)
    blob = await cell.snapshot()
    resumed = await AsyncCell.restore(blob, recorder, runtime=runtime)
    await resumed.deliver(outcome.request_ids[0], True, "41")
    assert await resumed.pump() == Completed("42")


async def test_two_guests_run_concurrently_in_separate_threads(
    runtime: QuickJSRuntime, recorder: Recorder
) -> None:
    limits = SandboxLimits(timeout=0.4)
    cells = [await AsyncCell.boot(None, recorder, limits=limits, runtime=runtime) for _ in range(2)]
    results: list[Failed] = []

    async def spin(cell: AsyncCell) -> None:
        outcome = await cell.run("while (true) {}")
        assert isinstance(outcome, Failed)
        results.append(outcome)

    start = time.monotonic()
    async with anyio.create_task_group() as group:
        for cell in cells:
            group.start_soon(spin, cell)
    elapsed = time.monotonic() - start
    assert [r.kind for r in results] == [FailureKind.TIMEOUT] * 2
    assert elapsed < 0.75  # sequential would take 0.8 s


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
