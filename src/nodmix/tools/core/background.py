"""Background commands of the shell `exec` tool (`background: true`).

A background command runs detached in its own session, so it outlives the tool call (a dev
server, a watcher). The process that owns the tool tracks every one it started and stops them
all when it shuts down (`stop_all`, called by the runtime on exit): nothing it started is left
behind. Output goes to a log file the model can read; a reader thread copies the command's
output there and starts the file over when it passes its size cap, so a chatty server cannot
fill the disk. At most `MAX_JOBS` background commands run at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import msgspec

from nodmix.errors import ToolError

if TYPE_CHECKING:
    import subprocess

MAX_JOBS: Final = 16
LOG_CAP_BYTES: Final = 4 * 1024 * 1024
LOG_DIR: Final = Path(".nodmix") / "background"
"""Where logs go, relative to the workspace."""
_STOP_GRACE_SECONDS: Final = 2.0
_CHUNK: Final = 64 * 1024


class Job(msgspec.Struct, kw_only=True):
    """One background command."""

    pid: int
    command: str
    log_path: Path
    process: subprocess.Popen[bytes]
    reader: threading.Thread | None = None
    started: float = msgspec.field(default_factory=time.monotonic)

    @property
    def running(self) -> bool:
        """Whether the command's shell is still running."""
        return self.process.poll() is None


def _copy_output(stream: IO[bytes], log_path: Path, cap: int) -> None:
    """Copy `stream` into `log_path` until EOF, starting the file over past `cap` bytes."""
    marker = b"[... earlier output dropped: the log keeps the latest output ...]\n"
    with stream, log_path.open("wb", buffering=0) as log:
        written = 0
        while chunk := stream.read1(_CHUNK):  # type: ignore[attr-defined]
            if written + len(chunk) > cap:
                log.seek(0)
                log.truncate()
                log.write(marker)
                written = len(marker)
                # One read can be larger than the whole cap (a busy machine lets the pipe
                # fill up): keep only its end.
                chunk = chunk[-max(1, cap - written) :]
            log.write(chunk)
            written += len(chunk)


def _signal_group(pid: int, sig: signal.Signals) -> bool:
    """Send `sig` to the process group `pid`; False if the group is gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(pid: int) -> bool:
    """Whether any process of the group `pid` still exists (zombies included)."""
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class BackgroundJobs:
    """The background commands one process started; `stop_all` ends them."""

    def __init__(self, *, max_jobs: int = MAX_JOBS, log_cap_bytes: int = LOG_CAP_BYTES) -> None:
        self._jobs: dict[int, Job] = {}
        self._lock = threading.Lock()
        self._max_jobs = max_jobs
        self._log_cap = log_cap_bytes

    def start(self, command: str, *, shell: str, cwd: Path, env: Mapping[str, str]) -> Job:
        """Start `command` detached in its own session, its output going to a log file.

        Raises:
            ToolError: Too many background commands are running, or the shell cannot start.
        """
        import subprocess  # when a command starts, not when the tool list is built

        with self._lock:
            self._forget_finished()
            if len(self._jobs) >= self._max_jobs:
                raise ToolError(
                    f"{len(self._jobs)} background commands are already running (the limit is "
                    f"{self._max_jobs}); stop one with `kill <pid>` first."
                )
            log_dir = cwd / LOG_DIR
            log_dir.mkdir(parents=True, exist_ok=True)
            try:
                process = subprocess.Popen(
                    [shell, "-c", command],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=dict(env),
                    start_new_session=True,
                )
            except OSError as exc:
                raise ToolError(f"Could not start the shell: {exc}") from exc
            log_path = log_dir / f"{process.pid}.log"
            job = Job(pid=process.pid, command=command, log_path=log_path, process=process)
            assert process.stdout is not None
            job.reader = threading.Thread(
                target=self._follow,
                args=(job, process.stdout),
                name=f"nodmix-bg-{process.pid}",
                daemon=True,
            )
            self._jobs[job.pid] = job
        job.reader.start()
        return job

    def _follow(self, job: Job, stream: IO[bytes]) -> None:
        try:
            _copy_output(stream, job.log_path, self._log_cap)
        except OSError:
            stream.close()  # the log cannot be written: the command gets SIGPIPE on output
        job.process.wait()  # reap the shell so it does not linger as a zombie

    def _forget_finished(self) -> None:
        for pid in [pid for pid, job in self._jobs.items() if not job.running]:
            if not group_alive(pid):
                del self._jobs[pid]

    def running(self) -> list[Job]:
        """The background commands whose shell or process group is still alive."""
        with self._lock:
            self._forget_finished()
            return list(self._jobs.values())

    def stop_all(self, grace: float = _STOP_GRACE_SECONDS) -> int:
        """Stop every background command and everything it started: SIGTERM to each process
        group, SIGKILL to what is left after `grace` seconds. Returns how many were signalled."""
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
        signalled = [job for job in jobs if _signal_group(job.pid, signal.SIGTERM)]
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(group_alive(job.pid) for job in signalled):
            time.sleep(0.02)
        for job in signalled:
            _signal_group(job.pid, signal.SIGKILL)
        import subprocess

        for job in jobs:
            try:
                job.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass  # shutdown carries on; the group was sent SIGKILL
        return len(signalled)


_DEFAULT = BackgroundJobs()


def background_jobs() -> BackgroundJobs:
    """The process-wide registry the core `exec` tool uses by default."""
    return _DEFAULT


def stop_background_jobs() -> int:
    """Stop every background command this process started (runtime shutdown)."""
    return _DEFAULT.stop_all()
