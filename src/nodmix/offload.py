"""Store calls from code on the event loop: a database store's leave the loop, a file store's
stay where they are.

A store of the postgres backend says `round_trips = True`: each of its calls is a network
round trip that a slow or locked database can stretch to seconds. Called on the event loop,
that would freeze every chat, the gateway and `/health` meanwhile. `call(store, fn, ...)` runs
such a call in a worker thread, at most `STORE_THREADS` at once per event loop (more wait
their turn), so a slow database delays only the coroutines waiting for it. A file store
(`round_trips` false or absent) is called directly: a local read or write costs less than a
thread hop, and its callers keep exactly the ordering they had. Like `nodmix.stores`, this
module imports nothing of Nodmix, so a store's caller in any layer may use it.

The caller awaits the call's end either way, so what it did before and after keeps its order
(a message is accepted before it is queued, a reply recorded before the next one goes). A
cancelled caller still waits for the thread (anyio's threads are not cancellable), so a write
it started is never left half-known.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

T = TypeVar("T")

STORE_THREADS = 8
"""Store calls in worker threads at once, per event loop."""

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("nodmix_store_threads")


def round_trips(store: object) -> bool:
    """Whether `store`'s calls are database round trips (a store of the postgres backend)."""
    return getattr(store, "round_trips", False) is True


def limiter() -> anyio.CapacityLimiter:
    """The worker threads store calls share on this event loop."""
    try:
        return _LIMITER.get()
    except LookupError:
        found = anyio.CapacityLimiter(STORE_THREADS)
        _LIMITER.set(found)
        return found


async def call(store: object, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, in a worker thread when `store` makes round trips."""
    if not round_trips(store):
        return fn(*args, **kwargs)
    work = functools.partial(fn, *args, **kwargs)
    return await anyio.to_thread.run_sync(work, limiter=limiter())
