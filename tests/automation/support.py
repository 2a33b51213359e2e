"""Helpers for automation tests: a config for a scripted model (and optionally Telegram), a
real runtime with a runner on an injected clock, and polling under a deadline."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from nodmix.automation.clock import Clock
from nodmix.automation.runner import JobRunner, RunLimits
from nodmix.config.loader import load_config
from nodmix.messages import UserMessage
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime
from nodmix.runtime.automation_turns import RuntimeTurns
from tests.support.config import write_json_config

DEADLINE_S = 15.0
write_config = write_json_config  # the scripted-model config, as plain JSON


def telegram_section(api: Any, **extra: Any) -> dict[str, Any]:
    """`channels` pointing Telegram at a `ScriptedBotAPI`."""
    return {
        "telegram": {
            "botToken": api.token,
            "apiBaseUrl": api.url,
            "pollTimeoutSeconds": 1,
            **extra,
        }
    }


@contextlib.asynccontextmanager
async def open_runner(
    state: Path, config: Path, clock: Clock, limits: RunLimits | None = None
) -> AsyncIterator[tuple[Runtime, JobRunner]]:
    """A real runtime and a runner of its automation on `clock`."""
    env = {**os.environ, "NODMIX_STATE_DIR": str(state)}
    async with Runtime.open(load_config(config), env=env, retry=RetryPolicy(attempts=1)) as rt:
        runner = rt.automation.make_runner(RuntimeTurns(rt), clock)
        if limits is not None:
            runner = JobRunner(
                store=runner.store,
                history=runner.history,
                turns=runner.turns,
                sender=runner.sender,
                clock=clock,
                limits=limits,
                inbox=runner.inbox,
            )
        try:
            yield rt, runner
        finally:
            for adapter in rt.channels.adapters.values():
                with contextlib.suppress(Exception):
                    await adapter.aclose()


async def poll(check: Callable[[], bool | Awaitable[bool]], *, what: str) -> None:
    """Until `check()` holds, under a deadline (polling, never a fixed sleep)."""
    try:
        with anyio.fail_after(DEADLINE_S):
            while True:
                result = check()
                if not isinstance(result, bool):
                    result = await result
                if result:
                    return
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def user_texts(server: Any) -> list[str]:
    """The last user message of every request the scripted model received."""
    out = []
    for recorded in server.requests:
        users = [m for m in recorded.request.messages if isinstance(m, UserMessage)]
        if users:
            out.append(users[-1].text)
    return out
