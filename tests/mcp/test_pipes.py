"""The stdio transport's stdin writer (`mcp.pipes`), written from another thread."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from nodmix.mcp.pipes import _StdinWriter

pytestmark = pytest.mark.anyio


async def test_a_line_queued_by_another_thread_as_stdin_closes_watches_no_reused_fd() -> None:
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    writer = _StdinWriter(write_end, loop)
    # A worker's line larger than the pipe: the rest waits for the loop to write it.
    sender = threading.Thread(target=writer.write_now, args=(b"x" * 200_000 + b"\n",))
    sender.start()
    sender.join()
    writer.close()  # before the loop ran what the worker asked of it
    fresh = os.pipe()  # takes the closed descriptor's number
    try:
        assert write_end in fresh
        for _ in range(3):  # (let the loop run the worker's callbacks)
            await asyncio.sleep(0)
        assert [loop.remove_writer(fd) for fd in fresh] == [False, False]
    finally:
        for fd in (read_end, *fresh):
            os.close(fd)
