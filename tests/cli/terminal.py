"""A real terminal for tests: a command running in a private tmux server.

`Terminal.run(argv, env)` starts it in a detached session of a tmux server on its own socket;
`wait_for(text)` polls the screen (under a deadline) and `type(...)` sends keys.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

DEADLINE_S = 20.0


class Terminal:
    """A 120x40 terminal running one command, on a tmux socket under `tmp`."""

    def __init__(self, tmp: Path) -> None:
        tmux = shutil.which("tmux")
        if tmux is None:
            raise AssertionError("tmux is missing: run `make terminal` (scripts/ensure-tmux.sh)")
        self.tmux = tmux
        self.socket = tmp / "tmux.sock"
        self.done_marker = "<<terminal-command-exited:"

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
            check=True,
        )
        return done.stdout

    def run(self, argv: Sequence[str], env: Mapping[str, str]) -> Terminal:
        """Start `argv` with `env` added; when it exits its status is printed and it waits."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        line = f"env {exports} {shlex.join(argv)}; echo '{self.done_marker}'$?'>>'; cat"
        self._tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", line)
        return self

    def screen(self) -> str:
        """What the terminal shows now."""
        return self._tmux("capture-pane", "-p", "-t", "t", "-S", "-200")

    def wait_for(self, text: str, *, timeout: float = DEADLINE_S) -> str:
        """Poll the screen until `text` appears (an AssertionError with the screen if not)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {text!r}; the screen:\n{screen}")
            time.sleep(0.02)

    def type(self, *keys: str) -> None:
        """Send keys (`Enter`, `Tab`, `C-c` are tmux key names; other strings are typed)."""
        for key in keys:
            if key in ("Enter", "Tab", "C-c", "C-d", "BSpace"):
                self._tmux("send-keys", "-t", "t", key)
            else:
                self._tmux("send-keys", "-t", "t", "-l", key)

    def exit_code(self, *, timeout: float = DEADLINE_S) -> int:
        """The command's exit status, once it has exited."""
        screen = self.wait_for(self.done_marker, timeout=timeout)
        tail = screen.split(self.done_marker, 1)[1]
        return int(tail.split(">>", 1)[0])

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        subprocess.run(
            [self.tmux, "-S", str(self.socket), "kill-server"],
            capture_output=True,
            timeout=DEADLINE_S,
            check=False,
        )
