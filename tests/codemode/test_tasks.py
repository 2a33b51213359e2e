"""Nested-call tasks: cheap asyncio tasks that a failure cannot turn into an engine crash."""

from __future__ import annotations

import asyncio
import logging

import anyio
import pytest

from nodmix.codemode.tasks import CallCancel, NestedTasks

from .support import wait_until


@pytest.mark.anyio
async def test_a_failing_task_is_logged_and_the_others_keep_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    finished: list[str] = []

    async def boom() -> None:
        raise RuntimeError("a bug in a nested call")

    async def fine() -> None:
        await anyio.sleep(0)
        finished.append("fine")

    async with anyio.create_task_group() as group:
        tasks = NestedTasks(group)
        with caplog.at_level(logging.ERROR, logger="nodmix.codemode"):
            tasks.start(boom)
            tasks.start(fine)
            await wait_until(lambda: finished == ["fine"], "the healthy task")
            await wait_until(lambda: "nested tool call task failed" in caplog.text, "the log")
        assert not group.cancel_scope.cancel_called
        await wait_until(lambda: len(tasks) == 0, "finished tasks to be forgotten")


@pytest.mark.anyio
async def test_cancel_and_wait_end_every_running_task() -> None:
    started, cancelled = anyio.Event(), []

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        except BaseException:
            cancelled.append(True)
            raise

    async with anyio.create_task_group() as group:
        tasks = NestedTasks(group)
        tasks.start(forever)
        await started.wait()
        assert len(tasks) == 1
        tasks.cancel()
        await tasks.wait()
        assert cancelled == [True] and len(tasks) == 0


async def _call_task(handle: CallCancel, started: anyio.Event) -> str:
    """A nested call's task body: the tool waits until cancelled."""
    handle.running_in(asyncio.current_task())
    try:
        started.set()
        await anyio.sleep_forever()
    except asyncio.CancelledError as exc:
        if handle.caught(exc):
            return "cancelled by its run"
        raise
    finally:
        handle.running_in(None)
    return "finished"


@pytest.mark.anyio
async def test_a_call_cancelled_by_its_handle_ends_with_a_result_not_a_cancelled_task() -> None:
    handle, started = CallCancel(), anyio.Event()
    task = asyncio.get_running_loop().create_task(_call_task(handle, started))
    await started.wait()
    handle.cancel()
    handle.cancel()  # idempotent
    assert await task == "cancelled by its run"
    assert not task.cancelled() and task.cancelling() == 0


@pytest.mark.anyio
@pytest.mark.parametrize("also_by_handle", [False, True])
async def test_a_call_task_cancelled_from_outside_its_handle_stays_cancelled(
    also_by_handle: bool,
) -> None:
    handle, started = CallCancel(), anyio.Event()
    task = asyncio.get_running_loop().create_task(_call_task(handle, started))
    await started.wait()
    task.cancel()  # e.g. the engine shutting down
    if also_by_handle:
        handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


@pytest.mark.anyio
async def test_a_handle_cancelled_before_its_call_runs_cancels_the_scope_it_hands_out() -> None:
    handle = CallCancel()
    handle.cancel()
    with handle.scope() as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_a_call_cancelled_before_it_registers_its_task_stops_at_its_first_await() -> None:
    handle, started = CallCancel(), anyio.Event()
    handle.cancel()  # e.g. the run ended while the call emitted its start event
    task = asyncio.get_running_loop().create_task(_call_task(handle, started))
    assert await task == "cancelled by its run"
    assert started.is_set()
