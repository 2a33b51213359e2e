"""Refusing a user message that cannot fit the model's context window, before any request.

Compaction can shrink the history but never the new message itself, so a message that is
larger than the whole window (with the tool definitions and the system prompt the model must
also receive) can only fail, after a compaction attempt and a wasted upload to the provider.
The loop checks it first and raises `PromptTooLargeError`: nothing is recorded (not even an API
client's earlier conversation, which the turn seeds only after this check) and nothing is
sent. Tokens are estimated as everywhere else in context management (`nodmix.context.tokens`);
the context engine's own system prompt addition is not known yet and not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodmix.context.tokens import (
    CHARS_PER_TOKEN,
    estimate_message_tokens,
    estimate_text_tokens,
    estimate_tool_tokens,
)
from nodmix.errors import PromptTooLargeError
from nodmix.messages import UserMessage
from nodmix.tools.base import ToolSpec


def ensure_prompt_fits(
    prompt: UserMessage,
    *,
    context_window: int,
    tools: Sequence[ToolSpec],
    model: str,
    system: Callable[[], str] | None = None,
) -> None:
    """Return when `prompt` can fit `context_window` next to the tool definitions and the
    system prompt (`system` builds it; only called for a large prompt).

    Raises:
        PromptTooLargeError: it cannot, whatever compaction does with the history.
    """
    tokens = estimate_message_tokens(prompt)
    if tokens <= context_window // 2:
        return  # the usual case: no need to size the tool definitions
    fixed = estimate_tool_tokens(tools) + (estimate_text_tokens(system()) if system else 0)
    if tokens + fixed <= context_window:
        return
    tools_note = ""
    if fixed:
        what = "the tool definitions and the system prompt" if tools else "the system prompt"
        tools_note = f" plus ~{fixed:,} for {what}"
    raise PromptTooLargeError(
        f"the message is too long for the model's context window: about {tokens:,} tokens "
        f"(estimated at {CHARS_PER_TOKEN} characters per token){tools_note}, but {model} holds "
        f"{context_window:,}; shorten it or split it up",
        tokens=tokens + fixed,
        context_window=context_window,
    )
