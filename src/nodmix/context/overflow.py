"""What happens when a turn's context cannot be made to fit.

`ContextOverflowError` (raised by provider adapters) means "compact and retry". Two cases end the
turn instead, each with a message the user can act on:

- compaction ran out of attempts, or there was nothing left to compact;
- the provider says its *own* summarisation failed (a proxy that compacts server side): a
  compaction of ours would only repeat the failing work.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Final, Literal

from nodmix.errors import ContextOverflowError, TurnError

if TYPE_CHECKING:
    from nodmix.context.guard import ContextGuard

log = logging.getLogger("nodmix.context")

MAX_OVERFLOW_COMPACTIONS: Final = 3
"""Compactions one turn may run in answer to context-overflow errors."""

OVERFLOW_USER_MESSAGE: Final = (
    "This conversation no longer fits the model's context window, and automatic compaction "
    "could not make enough room. Send /compact (optionally with what to focus on) to summarise "
    "it, or /new to start a fresh session; the full history stays saved either way."
)

_COMPACTION_FAILURE = r"(?i)\b(?:summari[sz]ation|(?:auto[- ])?compaction)\s+failed\b"


def is_compaction_failure(text: str | None) -> bool:
    """Whether a provider error says a summarisation or compaction step itself failed."""
    return bool(text) and bool(re.search(_COMPACTION_FAILURE, text or ""))


class ContextOverflowUnrecoveredError(TurnError):
    """The request did not fit the context window and compaction could not fix it."""

    def __init__(
        self,
        message: str = OVERFLOW_USER_MESSAGE,
        *,
        kind: Literal["context_overflow", "compaction_failure"] = "context_overflow",
        compactions: int = 0,
        provider_error: str | None = None,
    ) -> None:
        self.kind = kind
        self.compactions = compactions
        self.provider_error = provider_error
        super().__init__(message)


async def recover_from_overflow(
    guard: ContextGuard, error: ContextOverflowError, compactions: int
) -> int:
    """Compact after a provider's context-overflow error so the request can be retried.

    Args:
        guard: The turn's context guard.
        error: What the provider said.
        compactions: Overflow compactions this turn already ran.

    Returns:
        The new count of overflow compactions (retry the request).

    Raises:
        ContextOverflowUnrecoveredError: the provider's own summarisation failed, the attempts
            are used up, or there was nothing left to compact.
    """
    text = str(error)
    if is_compaction_failure(text):
        raise ContextOverflowUnrecoveredError(
            kind="compaction_failure", compactions=compactions, provider_error=text
        ) from error
    if compactions >= MAX_OVERFLOW_COMPACTIONS:
        raise ContextOverflowUnrecoveredError(
            compactions=compactions, provider_error=text
        ) from error
    attempt = compactions + 1
    # Info, not warning: the CLI prints warnings, and recovering is the normal path.
    log.info(
        "context overflow (attempt %d/%d); compacting: %s", attempt, MAX_OVERFLOW_COMPACTIONS, text
    )
    if not await guard.compact("overflow", attempt=attempt, error=text):
        log.info("auto-compaction could not make room after a context overflow")
        raise ContextOverflowUnrecoveredError(
            compactions=compactions, provider_error=text
        ) from error
    log.info("auto-compaction after a context overflow succeeded; retrying the request")
    return attempt
