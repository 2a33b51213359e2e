"""Retrying a platform API call that failed for a passing reason (a 5xx, a 429, a timeout, a
dropped connection), with backoff, and keeping the channel's status honest about it: a call
that still fails marks the channel disconnected with the reason, and the next call that goes
through marks it connected again."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from nodmix.channels.status import ChannelStatus

T = TypeVar("T")
log = logging.getLogger("nodmix.channels")

ATTEMPTS = 3
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 10.0


def status_delay(code: int, retry_after: str = "") -> float | None:
    """The wait before retrying a call the platform answered with HTTP `code`: a 429's
    `Retry-After` seconds (else 1 s), none for a 5xx (the backoff decides), None (final) for
    anything else."""
    if code == 429:
        return float(retry_after) if retry_after.isdigit() else 1.0
    return 0.0 if code >= 500 else None


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    transient: Callable[[Exception], float | None],
    status: ChannelStatus | None,
    what: str,
    attempts: int = ATTEMPTS,
) -> T:
    """`call()`, tried up to `attempts` times while `transient(exc)` gives a delay (None: the
    error is final, raised at once).

    Raises:
        Exception: the last error.
    """
    delay = FIRST_DELAY_SECONDS
    for attempt in range(1, attempts + 1):
        try:
            result = await call()
        except Exception as exc:
            wait = transient(exc)
            if wait is None or attempt == attempts:
                if wait is not None and status is not None:
                    status.connected = False
                    status.error(f"{what} unreachable: {exc}")
                    log.warning("%s: %s unreachable: %s", status.channel, what, exc)
                raise
            await anyio.sleep(min(MAX_DELAY_SECONDS, max(wait, delay)))
            delay *= 2
            continue
        if status is not None and not status.connected:
            status.connected = True
            log.info("%s: %s reachable again", status.channel, what)
        return result
    raise AssertionError("unreachable")
