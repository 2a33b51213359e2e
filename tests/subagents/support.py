"""Helpers for subagent tests: a config for the scripted model with `subagents` settings, a
real runtime on it, children the test holds until it lets them go, and reading records."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from nodmix.config.loader import load_config
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import Reply
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime
from nodmix.subagents.records import SubagentRun
from nodmix.subagents.store import open_subagent_store
from nodmix.testing.scripts.echo import last_user_text
from nodmix.testing.scripts.subagents import respond as subagents_script
from tests.support.config import scripted_config

DEADLINE_S = 20.0


def write_config(
    state: Path,
    base_url: str,
    subagents: dict[str, Any] | None = None,
    *,
    agents: list[dict[str, Any]] | None = None,
    **top: Any,
) -> Path:
    """`nodmix.json`: the scripted model, `agents.defaults.subagents` and `top` sections."""
    config = scripted_config(base_url, **top)
    defaults = config["agents"]["defaults"]
    if subagents is not None:
        defaults["subagents"] = subagents
    if agents is not None:
        config["agents"]["list"] = agents
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def open_runtime(state: Path) -> AsyncIterator[Runtime]:
    """A real runtime on `state`'s config (no retries)."""
    env = {**os.environ, "NODMIX_STATE_DIR": str(state)}
    loaded = load_config(state / "nodmix.json", env=env)
    async with Runtime.open(loaded, env=env, retry=RetryPolicy(attempts=1)) as runtime:
        yield runtime


async def poll(check: Callable[[], bool], *, what: str, timeout: float = DEADLINE_S) -> None:
    """Wait until `check()` holds (polling under a deadline, never a fixed sleep)."""
    try:
        with anyio.fail_after(timeout):
            while not check():
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def first_user_text(request: ModelRequest) -> str:
    """The first user message of a request: the task, for a subagent's request."""
    for message in request.messages:
        if isinstance(message, UserMessage):
            return message.text
    return ""


class HeldChildren:
    """The `subagents` script, except that a request whose last user message starts with
    `held` waits until the test calls `release()`; counts the held requests in flight. Works
    with the model server on this event loop or on its own thread."""

    def __init__(self, respond: Callable[[ModelRequest], Awaitable[Reply]] = subagents_script):
        self._respond = respond
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.tool_names: dict[str, list[str]] = {}
        """Task of each child request -> names of the tools it was offered."""

    def release(self) -> None:
        self._released.set()

    async def __call__(self, request: ModelRequest) -> Reply:
        text = last_user_text(request) or ""
        self.tool_names.setdefault(first_user_text(request), [t.name for t in request.tools])
        if not text.startswith("held"):
            return await self._respond(request)
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            while not self._released.is_set():
                await anyio.sleep(0.005)
            return await self._respond(request)
        finally:
            with self._lock:
                self.in_flight -= 1


def records(state: Path) -> list[SubagentRun]:
    """Every run record on disk, oldest first."""
    return open_subagent_store(state).all()


def tool_json(text: str) -> Any:
    """A session tool's JSON result text."""
    return json.loads(text)


def tool_ctx(session_key: str, *, run_id: str = "run_test", origin: Any = None) -> Any:
    """The context of a tool call from a turn in `session_key` (of its agent)."""
    from nodmix.tools.base import ToolContext

    return ToolContext(
        agent_id=session_key.split(":")[1],
        session_key=session_key,
        session_id="test",
        run_id=run_id,
        call_id="call_test",
        workspace=Path("."),
        origin=origin,
    )


def own_tokens(messages: list[Any]) -> int:
    """Tokens of the assistant replies among `messages`, as a session counts them."""
    total = 0
    for message in messages:
        usage = getattr(message, "usage", None)
        if usage is not None:
            total += usage.total_tokens or usage.input + usage.output
    return total


def ended(state: Path, count: int) -> bool:
    """Whether `count` runs are on disk and every one has ended (its last state written)."""
    runs = records(state)
    return len(runs) == count and not any(run.is_open for run in runs)


async def wait_ended(state: Path, count: int) -> list[SubagentRun]:
    """The records once `count` runs have ended."""
    await poll(lambda: ended(state, count), what=f"{count} ended run(s) on disk")
    return records(state)
