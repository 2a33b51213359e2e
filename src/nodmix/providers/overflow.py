"""Recognise "the prompt does not fit the context window" in provider error text.

Providers phrase overflow in many ways and only some give it a machine-readable code, so the
adapters fall back to matching the message. Two lists keep the check honest:

- `_OVERFLOW` holds phrasings that only occur when the request is too big for the window
  (Anthropic, OpenAI, Google, Bedrock, xAI, Groq, OpenRouter, llama.cpp, Ollama, vLLM, ...).
- `_NOT_OVERFLOW` holds look-alikes that must never trigger compaction: throughput limits
  (tokens per minute/day, 413s from TPM limits), quota and billing errors, and the "context
  window too small" configuration error. Compacting would not fix any of those, so they win
  over a positive match.

Plain prose that merely mentions the words ("Let's investigate the context overflow bug")
does not match because every pattern needs the shape of an error, not just the topic.
"""

from __future__ import annotations

import re

_OVERFLOW = re.compile(
    "|".join(
        (
            r"request_too_large",
            r"request exceeds the maximum size",
            r"context[ _]length[ _]exceeded",
            r"maximum context length",
            r"maximum prompt length is \d+",
            r"prompt is too long",
            r"prompt too (?:large|long)",
            r"\bcontext overflow:",
            r"\b413\b.{0,20}request entity too large",
            r"exceeds? (?:the )?model(?:'s)? context window",
            r"exceeds the context window",
            r"exceeded model token limit",
            r"exceeds? (?:the )?context limit",
            r"context[ _]window[ _]exceeded",
            r"ran out of room in the model's context window",
            r"model context window is \S+ tokens, you requested",
            r"input is too long for (?:the |requested )?model",
            r"input token count.{0,40}exceeds the maximum",
            r"input exceeds the maximum number of tokens",
            r"total tokens exceeds? the model's maximum",
            r"exceeds the available context size",
            r"reduce the length of the messages",
            r"上下文过长",
            r"上下文长度超",
            r"压缩上下文",
        )
    ),
    re.IGNORECASE,
)

_NOT_OVERFLOW = re.compile(
    "|".join(
        (
            r"tokens? per (?:min|minute|hour|day)",
            r"\b(?:tpm|tpd|rpm|rpd)\b",
            r"rate[ _-]?limit",
            r"too many requests",
            r"quota",
            r"billing",
            r"payment required",
            r"context window (?:is )?too small",
        )
    ),
    re.IGNORECASE,
)


def is_context_overflow(text: str | None) -> bool:
    """Whether a provider error message says the prompt does not fit the context window.

    Args:
        text: The provider's error message (or the whole error body); `None` is not overflow.

    Returns:
        True for overflow signatures, False for everything else, including rate-limit,
        quota and billing errors that mention tokens.
    """
    if not text:
        return False
    return bool(_OVERFLOW.search(text)) and not _NOT_OVERFLOW.search(text)
