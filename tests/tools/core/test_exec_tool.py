from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest

from nodmix.config.schema import ExecToolConfig, ToolsConfig
from nodmix.tools.base import ToolContext
from nodmix.tools.core import core_tools
from nodmix.tools.core.exec import ExecTool, OutputBuffer

pytestmark = pytest.mark.anyio


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (containers may not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_until_gone(pid: int, deadline: float = 5.0) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.01)
    return False


async def _read_pid(path: Path) -> int:
    with anyio.fail_after(5):
        while True:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            if text.strip():
                return int(text)
            await anyio.sleep(0.01)


async def test_command_output_and_zero_exit_are_reported(ctx: ToolContext) -> None:
    result = await ExecTool().call({"command": "echo hello"}, ctx)
    assert not result.is_error
    assert result.text_content.startswith("hello\n")
    assert "Exit code: 0" in result.text_content
    assert result.details["exitCode"] == 0
    assert result.details["timedOut"] is False
    assert result.details["truncated"] is False
    assert isinstance(result.details["durationMs"], int)


async def test_stdout_and_stderr_are_interleaved_in_order(ctx: ToolContext) -> None:
    command = "echo one; echo two >&2; echo three; echo four >&2"
    result = await ExecTool().call({"command": command}, ctx)
    assert result.text_content.startswith("one\ntwo\nthree\nfour\n")


async def test_non_zero_exit_is_an_error_that_still_shows_output(ctx: ToolContext) -> None:
    result = await ExecTool().call({"command": "echo partial; exit 3"}, ctx)
    assert result.is_error
    assert "partial" in result.text_content
    assert "Exit code: 3" in result.text_content
    assert result.details["exitCode"] == 3


async def test_command_runs_in_the_workspace(ctx: ToolContext, workspace: Path) -> None:
    result = await ExecTool().call({"command": "pwd; touch made-here"}, ctx)
    assert result.text_content.splitlines()[0] == str(workspace)
    assert (workspace / "made-here").exists()


async def test_commands_get_no_stdin(ctx: ToolContext) -> None:
    with anyio.fail_after(5):
        result = await ExecTool().call({"command": "cat; echo after-cat"}, ctx)
    assert "after-cat" in result.text_content


async def test_empty_output_is_stated(ctx: ToolContext) -> None:
    result = await ExecTool().call({"command": "true"}, ctx)
    assert result.text_content.startswith("(no output)")


async def test_large_output_keeps_head_and_tail_with_a_marker(ctx: ToolContext) -> None:
    tool = ExecTool(max_output_bytes=1000)
    command = "printf START; head -c 200000 /dev/zero | tr '\\0' x; printf END"
    result = await tool.call({"command": command}, ctx)
    text = result.text_content
    assert text.startswith("START")
    assert "END\n" in text
    assert "bytes of output omitted" in text
    assert len(text) < 1200
    assert result.details["truncated"] is True


def test_output_buffer_reports_exactly_how_much_was_cut() -> None:
    buffer = OutputBuffer.create(10)
    for piece in (b"abc", b"defgh", b"ijklmnopqrstuvwxyz"):
        buffer.feed(piece)
    assert buffer.render() == "abcde\n\n[... 16 bytes of output omitted ...]\n\nvwxyz"


async def test_timeout_kills_the_whole_process_group(ctx: ToolContext, workspace: Path) -> None:
    command = "sleep 30 & echo $! > bg.pid; wait"
    with anyio.fail_after(10):
        result = await ExecTool().call({"command": command, "timeout": 0.2}, ctx)
    assert result.is_error
    assert result.details["timedOut"] is True
    assert "Timed out after 0.2 s" in result.text_content
    pid = int((workspace / "bg.pid").read_text(encoding="utf-8"))
    assert _wait_until_gone(pid)


async def test_cancelling_the_caller_kills_the_process_group_promptly(
    ctx: ToolContext, workspace: Path
) -> None:
    finished = False

    async def run() -> None:
        nonlocal finished
        await ExecTool().call({"command": "sleep 30 & echo $! > bg.pid; wait"}, ctx)
        finished = True

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            pid = await _read_pid(workspace / "bg.pid")
            assert _alive(pid)
            tg.cancel_scope.cancel()
    assert not finished
    assert _wait_until_gone(pid, deadline=2.0)


async def test_background_job_holding_the_pipe_does_not_block_the_result(
    ctx: ToolContext, workspace: Path
) -> None:
    command = "sleep 30 & echo $! > bg.pid; echo done"
    try:
        with anyio.fail_after(5):
            result = await ExecTool().call({"command": command}, ctx)
        assert result.text_content.startswith("done\n")
        assert not result.is_error
    finally:
        pid = int((workspace / "bg.pid").read_text(encoding="utf-8"))
        os.kill(pid, signal.SIGKILL)


async def test_process_killed_by_a_signal_is_reported(ctx: ToolContext) -> None:
    result = await ExecTool().call({"command": "kill -TERM $$"}, ctx)
    assert result.is_error
    assert "SIGTERM" in result.text_content


async def test_config_sets_the_output_cap_and_default_timeout(ctx: ToolContext) -> None:
    config = ToolsConfig(exec=ExecToolConfig(timeout_seconds=7, max_output_bytes=100))
    tool = next(t for t in core_tools(config) if t.spec.name == "exec")
    assert "default 7" in tool.spec.parameters["properties"]["timeout"]["description"]
    result = await tool.call({"command": "head -c 5000 /dev/zero | tr '\\0' q"}, ctx)
    assert result.details["truncated"] is True
    assert result.text_content.count("q") == 100
