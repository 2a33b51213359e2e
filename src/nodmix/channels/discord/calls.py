"""discord.py calls cancelled the way discord.py expects: once.

The channel layer cancels with anyio, whose cancellation is level-triggered: every await after
the first one raises again while the scope stays cancelled. discord.py is written for asyncio's
one-shot cancellation: when a request is cancelled, its rate-limit bucket is given back in an
`__aexit__` that awaits. Cancelled by anyio, that await raised too and the bucket stayed spent,
so the next call of the same route (the reply looking up the DM channel that the cancelled
typing indicator was looking up) waited 30 s for discord.py's fallback. The calls that a turn
cancels therefore run as their own asyncio task, which gets one `Task.cancel()`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import anyio

P = ParamSpec("P")
T = TypeVar("T")

CLEANUP_SECONDS = 10.0
"""How long a cancelled call may take to tidy up (give its bucket back, close its response)
before the caller goes on without it; discord.py's cleanup waits at most a bucket's reset."""

_tidying: set[asyncio.Task[Any]] = set()
"""Cancelled calls still tidying up after `CLEANUP_SECONDS` (kept referenced until done)."""


async def cancel_once(call: Coroutine[Any, Any, T]) -> T:
    """Await `call` in its own asyncio task; if the caller is cancelled, the task is cancelled
    once, allowed to tidy up, and the caller's cancellation goes on."""
    task = asyncio.ensure_future(call)
    task.add_done_callback(_retrieve)
    try:
        return await asyncio.shield(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task], timeout=CLEANUP_SECONDS)
            if not task.done():
                _tidying.add(task)
                task.add_done_callback(_tidying.discard)
        raise


def cancelled_once(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate an adapter method so that each call runs through `cancel_once`."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await cancel_once(method(*args, **kwargs))

    return wrapper


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Fetch the outcome so that a call failing after its caller left is not reported as an
    exception never retrieved (the caller was cancelled: nobody wants it)."""
    if not task.cancelled():
        task.exception()
