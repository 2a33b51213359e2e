"""Waiting, from sync test code, for a scripted server to have seen something: `check()` is
polled until it returns something truthy, and a wait that runs out says what the server saw
last, so a failing test shows where the conversation stopped."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_SECONDS = 0.02


def poll_until(
    check: Callable[[], T],
    timeout: float,
    recent: Callable[[], str],
    *,
    interval: float = POLL_SECONDS,
) -> T:
    """`check()`'s first truthy value, asked every `interval` seconds.

    Raises:
        TimeoutError: none within `timeout` seconds (the message ends with `recent()`).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s; {recent()}")
        time.sleep(interval)
