"""Nested-call tasks: cheap asyncio tasks that a failure cannot turn into an engine crash."""

from __future__ import annotations

import logging

import anyio
import pytest

from nodmix.codemode.tasks import NestedTasks

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
