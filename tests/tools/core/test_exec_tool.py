from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from nodmix.config.schema import ExecToolConfig, ToolsConfig
from nodmix.errors import ToolError
from nodmix.tools.base import ToolContext
from nodmix.tools.core import core_tools
from nodmix.tools.core.background import BackgroundJobs
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


async def _poll(check: Callable[[], bool], deadline: float = 5.0) -> None:
    with anyio.fail_after(deadline):
        while not check():
            await anyio.sleep(0.01)


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


async def test_a_job_left_running_is_killed_when_the_command_finishes(
    ctx: ToolContext, workspace: Path
) -> None:
    # `sleep 30 &` keeps the pipe open and would outlive the call: it is collected for a short
    # grace, then killed with the rest of the command's process group.
    command = "sleep 30 & echo $! > bg.pid; echo done"
    with anyio.fail_after(10):
        result = await ExecTool().call({"command": command}, ctx)
    assert result.text_content.startswith("done\n")
    assert not result.is_error
    assert result.details["strayProcessesKilled"] is True
    assert "background: true" in result.text_content
    pid = int((workspace / "bg.pid").read_text(encoding="utf-8"))
    assert _wait_until_gone(pid)


async def test_a_detached_grandchild_with_closed_output_is_killed_too(
    ctx: ToolContext, workspace: Path
) -> None:
    command = "(sleep 30 >/dev/null 2>&1 & echo $! > bg.pid) ; echo started"
    with anyio.fail_after(10):
        result = await ExecTool().call({"command": command}, ctx)
    assert result.text_content.startswith("started\n")
    pid = int((workspace / "bg.pid").read_text(encoding="utf-8"))
    assert _wait_until_gone(pid)


async def test_a_command_that_leaves_nothing_behind_says_nothing_about_strays(
    ctx: ToolContext,
) -> None:
    result = await ExecTool().call({"command": "echo hi"}, ctx)
    assert "strayProcessesKilled" not in result.details
    assert "left running" not in result.text_content


async def test_background_true_returns_at_once_and_the_process_keeps_running(
    ctx: ToolContext, workspace: Path
) -> None:
    jobs = BackgroundJobs()
    tool = ExecTool(jobs=jobs)
    command = "echo $$ > bg.pid; echo serving; sleep 30"
    try:
        with anyio.fail_after(10):
            result = await tool.call({"command": command, "background": True}, ctx)
        assert not result.is_error
        pid = result.details["pid"]
        log = workspace / result.details["logPath"]
        assert (
            f"pid {pid}" in result.text_content and result.details["logPath"] in result.text_content
        )
        assert await _read_pid(workspace / "bg.pid") == pid
        await _poll(lambda: log.exists() and "serving" in log.read_text(encoding="utf-8"))
        assert _alive(pid) and [job.pid for job in jobs.running()] == [pid]
        # It runs in its own session, apart from this process.
        assert os.getsid(pid) == pid != os.getsid(0)
    finally:
        stopped = jobs.stop_all(grace=1.0)
    assert stopped == 1
    assert _wait_until_gone(pid)
    assert jobs.running() == []


async def test_stop_all_takes_down_children_of_background_commands(
    ctx: ToolContext, workspace: Path
) -> None:
    jobs = BackgroundJobs()
    command = "trap '' TERM; sleep 30 & echo $! > child.pid; wait"
    result = await ExecTool(jobs=jobs).call({"command": command, "background": True}, ctx)
    child = await _read_pid(workspace / "child.pid")
    assert _alive(child)
    jobs.stop_all(grace=0.2)  # the shell ignores SIGTERM: SIGKILL after the grace
    assert _wait_until_gone(child) and _wait_until_gone(result.details["pid"])


async def test_background_commands_are_capped(ctx: ToolContext) -> None:
    jobs = BackgroundJobs(max_jobs=1)
    tool = ExecTool(jobs=jobs)
    try:
        await tool.call({"command": "sleep 30", "background": True}, ctx)
        with pytest.raises(ToolError, match="the limit is 1"):
            await tool.call({"command": "sleep 30", "background": True}, ctx)
    finally:
        jobs.stop_all(grace=0.5)


@pytest.mark.parametrize(
    ("cap", "output_bytes"),
    [
        (10_000, 200_000),  # many reads, each smaller than the cap
        (200, 50_000),  # one read larger than the whole cap: a busy machine's full pipe
    ],
)
def test_a_chatty_background_log_stays_under_its_cap(
    workspace: Path, cap: int, output_bytes: int
) -> None:
    jobs = BackgroundJobs(log_cap_bytes=cap)
    job = jobs.start(
        f"head -c {output_bytes} /dev/zero | tr '\\0' x; echo; echo last line",
        shell="/bin/sh",
        cwd=workspace,
        env=os.environ,
    )
    assert job.reader is not None
    job.reader.join(timeout=30)
    text = job.log_path.read_text(encoding="utf-8")
    assert len(text) <= cap and text.endswith("last line\n")
    assert text.startswith("[... earlier output dropped")


async def test_the_runtime_stops_background_commands_when_it_closes(
    isolated_state: Path,
) -> None:
    from nodmix.runtime import Runtime

    workspace = isolated_state / "ws"
    workspace.mkdir()
    ctx = ToolContext(
        agent_id="main",
        session_key="agent:main:main",
        session_id="s1",
        run_id="r1",
        call_id="call-1",
        workspace=workspace,
    )
    async with Runtime.open():
        result = await ExecTool().call({"command": "sleep 30", "background": True}, ctx)
        pid = result.details["pid"]
        assert _alive(pid)
    assert _wait_until_gone(pid)


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
