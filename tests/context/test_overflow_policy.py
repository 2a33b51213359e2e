"""Which provider errors mean "compact and retry", and when the turn must give up."""

from __future__ import annotations

import pytest

from nodmix.context.base import CompactionTrigger
from nodmix.context.guard import RequestDraft, RequestPlan
from nodmix.context.overflow import (
    MAX_OVERFLOW_COMPACTIONS,
    ContextOverflowUnrecoveredError,
    is_compaction_failure,
    recover_from_overflow,
)
from nodmix.errors import ContextOverflowError
from nodmix.providers.errors import classify_error

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "text",
    [
        'Context overflow: Summarization failed: 400 {"message":"prompt is too long"}',
        "auto-compaction failed due to context overflow",
        "Compaction failed: prompt is too long",
        "Summarization failed: context window exceeded for this request",
    ],
)
def test_compaction_failures_are_recognised(text: str) -> None:
    assert is_compaction_failure(text)


@pytest.mark.parametrize(
    "text", ["Context overflow: prompt too large", "rate limit exceeded", "", None]
)
def test_other_errors_are_not_compaction_failures(text: str | None) -> None:
    assert not is_compaction_failure(text)


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (400, "This model's maximum context length is 8192 tokens"),
        (400, "input length and max_tokens exceed context limit (i.e 156321 + 48384 > 200000)"),
        (400, "ollama error: context length exceeded"),
        (413, "413 Request Entity Too Large"),
        (400, "上下文过长"),
    ],
)
def test_overflow_wordings_become_context_overflow_errors(status: int, text: str) -> None:
    assert isinstance(
        classify_error(provider="p", status=status, message=text), ContextOverflowError
    )


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (429, "Too Many Requests"),
        (413, "Rate limit: tokens per minute"),
        (402, "Payment Required: request token limit exceeded for this billing plan"),
    ],
)
def test_throughput_and_billing_errors_are_not_overflow(status: int, text: str) -> None:
    assert not isinstance(
        classify_error(provider="p", status=status, message=text), ContextOverflowError
    )


class Guard:
    def __init__(self, compacts: bool) -> None:
        self.compacts = compacts
        self.calls: list[tuple[str, int]] = []

    @property
    def token_budget(self) -> int:
        return 1000

    async def before_turn(self) -> None:
        return None

    async def review(self, draft: RequestDraft, *, may_compact: bool) -> RequestPlan:
        raise AssertionError("not used")

    async def compact(
        self, trigger: CompactionTrigger, *, attempt: int, error: str | None = None
    ) -> bool:
        self.calls.append((trigger, attempt))
        return self.compacts


async def test_recovery_compacts_with_rising_attempt_numbers_then_gives_up() -> None:
    guard = Guard(compacts=True)
    error = ContextOverflowError("context_length_exceeded")
    count = 0
    for _ in range(MAX_OVERFLOW_COMPACTIONS):
        count = await recover_from_overflow(guard, error, count)
    assert guard.calls == [("overflow", 1), ("overflow", 2), ("overflow", 3)]
    with pytest.raises(ContextOverflowUnrecoveredError) as caught:
        await recover_from_overflow(guard, error, count)
    assert caught.value.compactions == 3 and caught.value.provider_error == str(error)
