"""The `exec` tool: run a shell command in the workspace.

The command runs in its own session (and so its own process group), which lets a timeout or a
cancelled turn kill everything the command started, not just the shell; when the command
finishes, whatever it left running in its group (`sleep 1000 &`) is killed too. A command that
should keep running asks for `background: true` (see `background.py`). stdout and stderr share
one pipe so the model sees them interleaved in the order they were written.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, Process

from nodmix.errors import ToolError
from nodmix.messages import JsonObject
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import CoreTool, optional_bool, optional_number, require_str
from nodmix.tools.core.background import BackgroundJobs, background_jobs, group_alive
from nodmix.tools.isolation import Isolation, Launch

DEFAULT_TIMEOUT_SECONDS = 120.0
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
MAX_TIMEOUT_SECONDS = 3600

# Once the shell has exited, a background job it started may keep the pipe open forever. We
# collect what is already there for this long, then stop reading and leave the job alone.
_DRAIN_GRACE_SECONDS = 0.5

_DESCRIPTION = (
    "Run a shell command with `{shell} -c` in the workspace directory. "
    "Returns stdout and stderr interleaved, then the exit code; a non-zero exit is reported as "
    "an error. Output over {cap} is shortened to its start and end. There is no stdin, so do "
    "not start interactive programs. The command and everything it started is killed after "
    "`timeout` seconds (default {timeout:g}); what it leaves running (`cmd &`) is killed when it "
    "ends. For a server or watcher pass `background: true`: returns at once with the pid and log "
    "file; stop it with `kill <pid>`."
)


class OutputBuffer(msgspec.Struct):
    """Keeps the first and last bytes of a stream within `limit` bytes in total."""

    limit: int
    head: bytearray
    tail: bytearray
    total: int = 0

    @classmethod
    def create(cls, limit: int) -> OutputBuffer:
        """An empty buffer holding at most `limit` bytes."""
        return cls(limit=max(limit, 2), head=bytearray(), tail=bytearray())

    def feed(self, chunk: bytes) -> None:
        """Add bytes in stream order."""
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            keep = self.limit - len(self.head)
            if len(self.tail) > keep:
                del self.tail[: len(self.tail) - keep]

    @property
    def truncated(self) -> bool:
        """Whether bytes were dropped from the middle."""
        return self.total > len(self.head) + len(self.tail)

    def render(self) -> str:
        """The kept text, with a marker where bytes were dropped."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail
        cut = self.total - len(self.head) - len(self.tail)
        return f"{head}\n\n[... {cut} bytes of output omitted ...]\n\n{tail}"


class _Outcome(msgspec.Struct, frozen=True):
    exit_code: int | None
    output: OutputBuffer
    timed_out: bool
    duration_ms: int
    strays_killed: bool = False


def _shell() -> str:
    return "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


async def _pump(stream: ByteReceiveStream, output: OutputBuffer, done: anyio.Event) -> None:
    try:
        async for chunk in stream:
            output.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def _wait(process: Process, output: OutputBuffer, timeout: float) -> bool:
    """Wait for the shell (killing the group on timeout) and drain its output; True if timed out."""
    assert process.stdout is not None
    drained = anyio.Event()
    timed_out = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(_pump, process.stdout, output, drained)
        with anyio.move_on_after(timeout):
            await process.wait()
        if process.returncode is None:
            timed_out = True
            _kill_group(process.pid)
            await process.wait()
        with anyio.move_on_after(_DRAIN_GRACE_SECONDS):
            await drained.wait()
        tg.cancel_scope.cancel()
    return timed_out


async def _run_command(
    command: str,
    *,
    shell: str,
    cwd: Path,
    timeout: float,
    max_output_bytes: int,
    extra_env: Mapping[str, str] | None = None,
    isolate: Callable[[Launch], Awaitable[Launch]] | None = None,
) -> _Outcome:
    """Run `command` through the shell and collect its output.

    If the calling task is cancelled, the whole process group is killed before the cancellation
    propagates. `isolate` (a sandboxed session) rewrites the launch before the spawn.
    """
    env = {**os.environ, **(extra_env or {}), "PAGER": "cat", "GIT_PAGER": "cat"}
    launch = Launch(argv=(shell, "-c", command), env=env, cwd=cwd)
    if isolate is not None:
        launch = await isolate(launch)
    started = time.monotonic()
    try:
        # Shielded: if the turn were cancelled mid-spawn, asyncio would kill only the shell and
        # orphan anything it had already started. With the handle in hand, the first await
        # below sees the cancellation and the `finally` takes down the whole group.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                list(launch.argv),
                stdin=_subprocess().DEVNULL,
                stdout=_subprocess().PIPE,
                stderr=_subprocess().STDOUT,
                cwd=launch.cwd,
                env=dict(launch.env),
                start_new_session=True,
            )
    except OSError as exc:
        raise ToolError(f"Could not start the shell: {exc}") from exc
    output = OutputBuffer.create(max_output_bytes)
    strays = False
    try:
        timed_out = await _wait(process, output, timeout)
        # The shell is done: whatever it left running in its group goes too. (The group id is
        # the shell's pid, which the kernel does not reuse while the group has members.)
        strays = not timed_out and group_alive(process.pid)
    finally:
        # Finished, timed out, cancelled or broken: take down everything the command started.
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    duration_ms = round((time.monotonic() - started) * 1000)
    return _Outcome(process.returncode, output, timed_out, duration_ms, strays)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "Exit code: unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"Killed by {name} (exit code {code})"
    return f"Exit code: {code}"


class ExecTool(CoreTool):
    """Runs shell commands in the workspace, with a timeout and an output cap."""

    def __init__(
        self,
        *,
        isolation: Isolation | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        jobs: BackgroundJobs | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """Create the tool.

        Args:
            isolation: Runs the commands of sandboxed sessions inside the sandbox.
            timeout_seconds: Default timeout when the model gives none.
            max_output_bytes: How much combined output is kept (start and end).
            jobs: Tracks `background: true` commands (default: the process-wide registry,
                stopped when the runtime shuts down).
            extra_env: Variables added to the commands' environment (the offered skills'
                `skills.entries.<name>.env` / `apiKey`).
        """
        self._jobs = jobs if jobs is not None else background_jobs()
        self._extra_env = dict(extra_env or {})
        self._isolation = isolation
        self._timeout = timeout_seconds
        self._max_output_bytes = max_output_bytes
        self._shell = _shell()
        cap = f"{max_output_bytes // 1024} KB" if max_output_bytes >= 1024 else "the cap"
        self._spec = ToolSpec(
            name="exec",
            label="Shell",
            description=_DESCRIPTION.format(shell=self._shell, cap=cap, timeout=timeout_seconds),
            parameters={
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Shell command line to run, e.g. `ls -la src`.",
                    },
                    "background": {
                        "type": "boolean",
                        "description": "Run detached; return its pid and log file at once.",
                    },
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_TIMEOUT_SECONDS,
                        "description": (
                            f"Seconds before the command is killed (default {timeout_seconds:g})."
                        ),
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Run the command and report its output and exit status."""
        command = require_str(args, "command", allow_empty=False)
        timeout = min(optional_number(args, "timeout") or self._timeout, float(MAX_TIMEOUT_SECONDS))
        isolation = self._isolation
        sandboxed = isolation is not None and isolation.applies(ctx)
        background = optional_bool(args, "background")
        if sandboxed and background:
            # A detached command would outlive the sandbox's PID namespace: refuse, never run it
            # outside.
            raise ToolError(
                "background commands are not available in a sandboxed session (everything a "
                "sandboxed command starts ends with it); run it in the foreground with a timeout."
            )
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        if background:
            return self._start_background(command, ctx)
        outcome = await _run_command(
            command,
            shell=self._shell,
            cwd=ctx.workspace,
            timeout=timeout,
            max_output_bytes=self._max_output_bytes,
            extra_env=self._extra_env,
            isolate=partial(isolation.wrap, ctx=ctx) if isolation and sandboxed else None,
        )
        details = {
            "exitCode": outcome.exit_code,
            "durationMs": outcome.duration_ms,
            "truncated": outcome.output.truncated,
            "timedOut": outcome.timed_out,
            "sandboxed": sandboxed,
        }
        text = outcome.output.render() or "(no output)"
        if outcome.timed_out:
            status = (
                f"Timed out after {timeout:g} s: the command and its child processes were killed. "
                "Pass a larger `timeout` if it needs more time."
            )
        else:
            status = _describe_exit(outcome.exit_code)
        if outcome.strays_killed:
            details["strayProcessesKilled"] = True
            status += (
                "\nProcesses the command left running were killed; pass `background: true` to "
                "keep a process running."
            )
        failed = outcome.timed_out or outcome.exit_code != 0
        result = ToolResult.error if failed else ToolResult.text
        return result(f"{text.rstrip()}\n\n{status}", details=details)

    def _start_background(self, command: str, ctx: ToolContext) -> ToolResult:
        env = {**os.environ, **self._extra_env, "PAGER": "cat", "GIT_PAGER": "cat"}
        job = self._jobs.start(command, shell=self._shell, cwd=ctx.workspace, env=env)
        log = job.log_path.relative_to(ctx.workspace)
        return ToolResult.text(
            f"Started in the background: pid {job.pid}. Its output goes to {log} (in the "
            f"workspace; read it to follow along). Stop it with `kill {job.pid}`; it is stopped "
            "when Nodmix shuts down.",
            details={"pid": job.pid, "logPath": str(log), "background": True},
        )


def _subprocess() -> Any:
    # Imported when a command runs, not when the tool list is built (start-up time).
    import subprocess

    return subprocess
