"""Context-overflow recognition: every error signature providers are known to send on overflow."""

from __future__ import annotations

import pytest

from nodmix.providers.overflow import is_context_overflow

# the compaction spec (compaction.md), "Recognized overflow signatures".
SPEC_SIGNATURES = [
    "request_too_large",
    "context length exceeded",
    "input exceeds the maximum number of tokens",
    "input token count exceeds the maximum number of input tokens",
    "input is too long for the model",
    "ollama error: context length exceeded",
]

# reference-behaviour.md H.16: isContextOverflowError true list.
REFERENCE_OVERFLOW = [
    "request_too_large",
    "Request exceeds the maximum size",
    "context length exceeded",
    "Maximum context length",
    "prompt is too long: 208423 tokens > 200000 maximum",
    "Context overflow: Summarization failed",
    "413 Request Entity Too Large",
    "Request size exceeds model context window",
    "Your request exceeded model token limit",
    "input length and max_tokens exceed context limit (i.e 156321 + 48384 > 200000)",
    "This request exceeds the model's maximum context length",
    "Unhandled stop reason: model_context_window_exceeded",
    "context_window_exceeded",
    "上下文过长",
    "请压缩上下文后重试",
    "ValidationException: The input is too long for the model",
    "ValidationException: Input token count exceeds the maximum number of input tokens",
    "INVALID_ARGUMENT: input exceeds the maximum number of tokens",
    "ollama error: context length exceeded",
    "ollama error: context length exceeded, too many tokens",
    "total tokens exceeds the model's maximum limit of 4096",
    "400 request (66202 tokens) exceeds the available context size (65536 tokens), try "
    "increasing it",
    "input is too long for model gpt-5.4",
]

# reference-behaviour.md H.16: isLikelyContextOverflowError true list.
REFERENCE_LIKELY_OVERFLOW = [
    "Model context window is 128k tokens, you requested 256k tokens",
    "Context window exceeded: requested 12000 tokens",
    "Prompt too large for this model",
    "Context window exceeded: too many tokens per request.",
    "Codex ran out of room in the model's context window. Start a new thread or clear earlier "
    "history before retrying.",
]

# Real provider phrasings the adapters meet (OpenAI, Anthropic bodies, Google, xAI, vLLM).
PROVIDER_BODIES = [
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130000 tokens. Please reduce the length of the messages.",
    "prompt is too long: 213462 tokens > 200000 maximum (invalid_request_error)",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    "Request exceeds the maximum allowed number of bytes. (request_too_large)",
    "Your input exceeds the context window of this model. (context_length_exceeded)",
]

NOT_OVERFLOW = [
    "rate limit exceeded",
    "request size exceeds upload limit",
    "model not found",
    "authentication failed",
    "Let's investigate the context overflow bug",
    "400 Reasoning is mandatory for this endpoint and cannot be disabled.",
    "413 Request too large for gpt-4o in organization org-abc on tokens per min (TPM): "
    "Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run "
    "successfully.",
    "Request too large for gpt-4.1 on tokens per min (TPM): Limit 30000, Requested 31000.",
    "Model context window too small (minimum is 128k tokens)",
    "Context window too small: minimum is 1000 tokens",
    "request reached organization TPD rate limit, current: 1000000, limit: 1000000",
    "429 Too Many Requests",
    "You exceeded your current quota, please check your plan and billing details.",
    "AWS Bedrock: Too many tokens per day, please wait before trying again.",
    "402 Payment Required: request token limit exceeded for this billing plan",
    "For context, here's the error message",
    "In the context of this operation the window was closed",
    "",
]


@pytest.mark.parametrize(
    "text", SPEC_SIGNATURES + REFERENCE_OVERFLOW + REFERENCE_LIKELY_OVERFLOW + PROVIDER_BODIES
)
def test_overflow_signatures_are_recognised(text: str) -> None:
    assert is_context_overflow(text) is True


@pytest.mark.parametrize("text", NOT_OVERFLOW)
def test_look_alikes_are_not_overflow(text: str) -> None:
    assert is_context_overflow(text) is False


def test_recognition_ignores_case() -> None:
    assert is_context_overflow("PROMPT IS TOO LONG: 300000 TOKENS > 200000 MAXIMUM")


def test_missing_text_is_not_overflow() -> None:
    assert is_context_overflow(None) is False
