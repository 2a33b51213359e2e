"""Retry rate limits, outages and timeouts with backoff, but never after output started.

Only what can succeed on a second try is retried: 429, 5xx other than 501, timeouts and
connections reset before the first event (`ProviderError.retryable`). A refused connection
to a local server, 501, other 4xx and a malformed stream fail at once.

Once an event has been yielded, the caller may already have shown text to the user;
repeating the request would show a second, different answer. So a failure after the first
event propagates, and only failures before it are retried.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio
import msgspec

from nodmix.config.schema import RetryConfig
from nodmix.errors import ProviderError
from nodmix.providers.base import ModelEvent, ModelRequest, Provider

logger = logging.getLogger("nodmix.providers")

Sleep = Callable[[float], Awaitable[Any]]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how patiently to retry a model request."""

    attempts: int = 4
    """Total attempts, including the first."""
    base_delay: float = 0.5
    """Seconds before the first retry; doubles for each one after."""
    max_delay: float = 8.0
    """Cap on the computed backoff."""
    max_retry_after: float = 30.0
    """Cap on a provider's `Retry-After`; longer requests are shortened to this."""
    jitter: float = 0.2
    """Backoff is scaled by a random factor in `[1 - jitter, 1 + jitter]`."""
    sleep: Sleep = anyio.sleep
    """How to wait; tests inject a recorder so they never actually sleep."""
    rand: Callable[[], float] = msgspec.field(default=random.random)
    """Source of jitter in `[0, 1)`."""

    def delay(self, retry: int, error: Exception) -> float:
        """Seconds to wait before retry number `retry` (0-based) after `error`."""
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return min(float(retry_after), self.max_retry_after)
        backoff = min(self.base_delay * 2.0**retry, self.max_delay)
        factor = 1 + self.jitter * (2 * self.rand() - 1)
        return max(0.0, min(backoff * factor, self.max_delay))

    def configured(self, config: RetryConfig | None) -> RetryPolicy:
        """This policy with a provider's `retry` settings applied (`maxDelaySeconds` caps
        both the backoff and a provider's `Retry-After`)."""
        if config is None:
            return self
        changes: dict[str, Any] = {}
        if config.attempts is not None:
            changes["attempts"] = config.attempts
        if config.max_delay_seconds is not None:
            changes["max_delay"] = config.max_delay_seconds
            changes["max_retry_after"] = config.max_delay_seconds
        return msgspec.structs.replace(self, **changes) if changes else self


async def stream_with_retry(
    provider: Provider, request: ModelRequest, policy: RetryPolicy | None = None
) -> AsyncIterator[ModelEvent]:
    """`provider.stream(request)`, retrying rate limits and outages that happen before output.

    Raises:
        ProviderError: Non-retryable errors at once; retryable ones once attempts run out
            or if they happen after the first event.
    """
    policy = policy or RetryPolicy()
    attempts = max(1, policy.attempts)
    for attempt in range(attempts):
        started = False
        try:
            async with aclosing(_as_generator(provider.stream(request))) as events:
                async for event in events:
                    started = True
                    yield event
            return
        except ProviderError as exc:
            if not exc.retryable or started or attempt == attempts - 1:
                raise
            wait = policy.delay(attempt, exc)
            logger.warning(
                "%s: attempt %d/%d failed (%s); retrying in %.1f s",
                provider.name,
                attempt + 1,
                attempts,
                exc,
                wait,
            )
            await policy.sleep(wait)


async def _as_generator(events: AsyncIterator[ModelEvent]) -> AsyncGenerator[ModelEvent, None]:
    # Providers return any async iterator; wrapping it gives `aclosing` something to close,
    # and closing the wrapper closes a generator underneath through its own cleanup.
    try:
        async for event in events:
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
