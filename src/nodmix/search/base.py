"""What a search provider is and what it returns."""

from __future__ import annotations

from typing import Protocol

import msgspec

from nodmix.errors import ToolError


class SearchResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One hit, compact for the model."""

    title: str
    url: str
    snippet: str = ""
    published: str | None = None
    """When the provider gives it (a date or a date-time, as the provider wrote it)."""


class SearchError(ToolError):
    """A search failed; the message is one line for the model and the user."""


class SearchProvider(Protocol):
    """One search service."""

    name: str
    """`searxng`, `brave`, `tavily`, `linkup`."""

    async def search(self, query: str, count: int) -> list[SearchResult]:
        """At most `count` results for `query`.

        Raises:
            SearchError: The service refused (key, rate limit), failed, or timed out.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def clip(text: str | None, limit: int = 400) -> str:
    """One line of at most `limit` characters (snippets are for scanning, not reading)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def retry_after_text(value: str | None) -> str:
    """` retry after N s` from a `Retry-After` header (seconds or an HTTP date), or ``."""
    if not value:
        return ""
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return f"; retry after {float(value):g} s"
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return ""
    import datetime

    seconds = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
    return f"; retry after {max(0, round(seconds))} s"


def status_error(
    provider: str, status: int, retry_after: str | None, body: str = ""
) -> SearchError:
    """The one line for an HTTP error status of a provider."""
    detail = clip(body, 160)
    if status in (401, 403) and provider != "searxng":
        return SearchError(
            f"web_search: {provider} rejected the API key (HTTP {status}); check "
            "tools.web.search.apiKey."
        )
    if status == 429:
        return SearchError(
            f"web_search: {provider} rate limit reached (HTTP 429){retry_after_text(retry_after)}."
        )
    suffix = f": {detail}" if detail else ""
    return SearchError(f"web_search: {provider} answered HTTP {status}{suffix}")


def timeout_error(provider: str, seconds: float) -> SearchError:
    """The one line for a search that took too long."""
    return SearchError(
        f"web_search: {provider} did not answer within {seconds:g} s "
        "(tools.web.search.timeoutSeconds)."
    )
