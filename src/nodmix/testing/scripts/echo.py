"""Built-in script `echo`: answer with the last user message's text."""

from __future__ import annotations

from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply


def last_user_text(request: ModelRequest) -> str | None:
    """The text of the newest user message, or `None` when there is none."""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return None


def respond(request: ModelRequest) -> ModelReply:
    """Echo the last user text (`(no user message)` when there is none)."""
    text = last_user_text(request)
    if text is None:
        return ModelReply.text("(no user message)")
    return ModelReply.text(text or "(empty message)")
