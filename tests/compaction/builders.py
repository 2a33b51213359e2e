"""Messages, sessions and scripted summarisers shared by the compaction tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodmix.compaction.base import SummaryRequest
from nodmix.compaction.prompts import SAFEGUARD_HEADINGS
from nodmix.messages import (
    AssistantMessage,
    StopReason,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from nodmix.sessions import Session, SessionManager


def user(text: str, *, ts: int = 1) -> UserMessage:
    return UserMessage(content=(TextBlock(text=text),), timestamp=ts)


def assistant(
    text: str = "",
    *calls: str,
    name: str = "tool",
    args: dict[str, Any] | None = None,
    stop: StopReason | None = None,
    usage: Usage | None = None,
) -> AssistantMessage:
    """An assistant message; each call id in `calls` becomes a call of tool `name`."""
    blocks: list[TextBlock | ToolCallBlock] = [TextBlock(text=text)] if text else []
    blocks += [ToolCallBlock(id=c, name=name, arguments=args or {"arg": c}) for c in calls]
    return AssistantMessage(
        content=tuple(blocks),
        stop_reason=stop or ("toolUse" if calls else "stop"),
        usage=usage or Usage(),
    )


def result(
    call_id: str, text: str = "ok", *, name: str = "tool", error: bool = False
) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=(TextBlock(text=text),), is_error=error
    )


def session(state: Path, key: str = "agent:main:main") -> Session:
    return SessionManager(state, durable=False).open(key)


def words(n: int, seed: str = "w") -> str:
    """About `n` characters of distinct words."""
    out = " ".join(f"{seed}{i}" for i in range(n // 4 + 1))
    return out[:n]


def headed(text: str) -> str:
    """A summary with every safeguard heading."""
    return text + "\n" + "\n".join(f"{h}\nNone." for h in SAFEGUARD_HEADINGS)


class ScriptedSummarizer:
    """Records requests; answers with `answer(request)` (default: a headed summary)."""

    def __init__(self, answer: Callable[[SummaryRequest], str] | None = None) -> None:
        self.requests: list[SummaryRequest] = []
        self._answer = answer or (lambda r: headed(f"summary {len(self.requests)}"))

    async def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self._answer(request)


async def no_sleep(seconds: float) -> None:
    return None
