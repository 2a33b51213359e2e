"""HTTP status + provider message -> the right ProviderError, in one line."""

from __future__ import annotations

import email.utils

import pytest

from nodmix.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
    RateLimitedError,
)
from nodmix.providers.anthropic import errors as anthropic_errors
from nodmix.providers.errors import classify_error, one_line, parse_retry_after, short_reason
from nodmix.providers.openai import errors as openai_errors


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "Incorrect API key provided", ProviderAuthError),
        (403, "Country not supported", ProviderAuthError),
        (404, "The model `gpt-9` does not exist", ProviderRequestError),
        (400, "Invalid value for 'temperature'", ProviderRequestError),
        (422, "unprocessable", ProviderRequestError),
        (429, "Rate limit reached", RateLimitedError),
        (429, "tokens per min (TPM) limit, prompt is too long", RateLimitedError),
        (400, "prompt is too long: 208423 tokens > 200000 maximum", ContextOverflowError),
        (413, "Request Entity Too Large (request_too_large)", ContextOverflowError),
        (413, "Request too large for gpt-4o on tokens per min (TPM)", ProviderRequestError),
        (500, "ollama error: context length exceeded", ContextOverflowError),
        (500, "Internal server error", ProviderUnavailableError),
        (502, "Bad gateway", ProviderUnavailableError),
        (503, "", ProviderUnavailableError),
        (529, "Overloaded", ProviderUnavailableError),
        (408, "Request timeout", ProviderUnavailableError),
        (None, "upstream connection reset", ProviderUnavailableError),
        (None, "Rate limit exceeded, retry later", RateLimitedError),
    ],
)
def test_status_and_message_pick_the_error_class(
    status: int | None, message: str, kind: type[ProviderError]
) -> None:
    error = classify_error(provider="openai", status=status, message=message)
    assert type(error) is kind
    assert error.provider == "openai"
    assert error.status == status


def test_error_message_is_one_line_with_provider_status_and_reason() -> None:
    error = classify_error(
        provider="anthropic", status=429, message="Slow\n  down,\tplease", retry_after=2.5
    )
    assert str(error) == "anthropic: 429 rate limited: Slow down, please"
    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 2.5
    assert error.retryable and error.fallback_eligible


def test_stream_errors_without_status_say_so() -> None:
    error = classify_error(provider="openai", status=None, message="boom")
    assert str(error) == "openai: stream error: boom"


def test_empty_message_leaves_just_the_status() -> None:
    assert str(classify_error(provider="x", status=503, message="")) == "x: 503 unavailable"


def test_short_reasons_cover_unknown_statuses() -> None:
    assert short_reason(418) == "i'm a teapot"
    assert short_reason(599) == "server error"
    assert short_reason(499) == "error"


def test_one_line_caps_long_text() -> None:
    text = one_line("word " * 200, limit=50)
    assert len(text) == 50
    assert text.endswith("…")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_headers(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_accepts_an_http_date() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 42, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(42, abs=1)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '{"error": {"message": "Incorrect API key", "type": "invalid_request_error",'
            ' "code": "invalid_api_key"}}',
            "Incorrect API key (invalid_api_key)",
        ),
        (
            '{"error": "model \\"llama9\\" not found, try pulling it first"}',
            'model "llama9" not found, try pulling it first',
        ),
        ('{"detail": "Not Found"}', "Not Found"),
        ('{"message": "bad"}', "bad"),
        (
            '{"error": {"message": "Provider returned error", "code": 400,'
            ' "metadata": {"raw": "prompt is too long: 300000 tokens > 200000 maximum"}}}',
            "Provider returned error: prompt is too long: 300000 tokens > 200000 maximum",
        ),
        ("<html>\n<body>Bad Gateway</body>\n</html>", "<html> <body>Bad Gateway</body> </html>"),
    ],
)
def test_openai_error_bodies_yield_the_provider_message(body: str, expected: str) -> None:
    assert openai_errors.extract_message(body) == expected


def test_openrouter_wrapped_overflow_is_detected_as_overflow() -> None:
    body = (
        '{"error": {"message": "Provider returned error", "code": 400,'
        ' "metadata": {"raw": "prompt is too long: 300000 tokens > 200000 maximum"}}}'
    )
    error = openai_errors.error_from_response("openrouter", 400, {}, body)
    assert isinstance(error, ContextOverflowError)
    assert error.body == body


def test_openai_stream_error_uses_its_code_as_status() -> None:
    error = openai_errors.error_from_stream("openrouter", {"message": "Upstream 502", "code": 502})
    assert isinstance(error, ProviderUnavailableError)
    assert error.status == 502


@pytest.mark.parametrize(
    ("body", "status", "kind", "text"),
    [
        (
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            529,
            ProviderUnavailableError,
            "anthropic: 529 overloaded: Overloaded (overloaded_error)",
        ),
        (
            '{"type":"error","error":{"type":"request_too_large",'
            '"message":"Request exceeds the maximum allowed number of bytes."}}',
            413,
            ContextOverflowError,
            "anthropic: 413 request too large: Request exceeds the maximum allowed number of"
            " bytes. (request_too_large)",
        ),
        (
            '{"type":"error","error":{"type":"authentication_error",'
            '"message":"invalid x-api-key"}}',
            401,
            ProviderAuthError,
            "anthropic: 401 unauthorized: invalid x-api-key (authentication_error)",
        ),
    ],
)
def test_anthropic_error_bodies_map_to_error_classes(
    body: str, status: int, kind: type[ProviderError], text: str
) -> None:
    error = anthropic_errors.error_from_response("anthropic", status, {}, body)
    assert type(error) is kind
    assert str(error) == text


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", ProviderUnavailableError),
        ("api_error", ProviderUnavailableError),
        ("rate_limit_error", RateLimitedError),
        ("invalid_request_error", ProviderRequestError),
        ("authentication_error", ProviderAuthError),
        ("brand_new_error", ProviderUnavailableError),
    ],
)
def test_anthropic_stream_error_types_stand_in_for_the_status(
    error_type: str, kind: type[ProviderError]
) -> None:
    error = anthropic_errors.error_from_stream("anthropic", {"type": error_type, "message": "m"})
    assert type(error) is kind
