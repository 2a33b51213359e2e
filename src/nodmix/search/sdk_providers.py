"""Tavily and Linkup through their own client libraries (optional extras).

`tavily-python`'s `AsyncTavilyClient` gets an httpx client of ours, whose response hook turns
401/403/429 into Nodmix's one-line errors with the `Retry-After` the library would drop.
`linkup-sdk` opens its own connection per call; its typed errors are mapped the same way.
"""

from __future__ import annotations

from typing import Any

from nodmix.search.base import SearchError, SearchResult, clip, status_error, timeout_error
from nodmix.search.settings import SearchSettings


def missing_extra(provider: str) -> SearchError:
    """The one-line install hint when a provider's library is not installed."""
    from nodmix.extras import hint, part

    return SearchError(f"web_search: {hint(part(provider))}")


class TavilyProvider:
    """The Tavily search API (`tavily-python`)."""

    name = "tavily"

    def __init__(self, settings: SearchSettings) -> None:
        try:
            import httpx
            from tavily import AsyncTavilyClient
        except ImportError:
            raise missing_extra("tavily") from None
        self._settings = settings

        async def check(response: httpx.Response) -> None:
            if response.status_code in (401, 403, 429, 432, 433):
                await response.aread()
                status = 429 if response.status_code in (432, 433) else response.status_code
                raise status_error(self.name, status, response.headers.get("retry-after"))

        self._http = httpx.AsyncClient(
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            event_hooks={"response": [check]},
        )
        self._client = AsyncTavilyClient(api_key=settings.api_key, client=self._http)
        self._timeout_errors: tuple[type[BaseException], ...] = (httpx.TimeoutException,)

    async def search(self, query: str, count: int) -> list[SearchResult]:
        from tavily.errors import TimeoutError as TavilyTimeout

        try:
            data: Any = await self._client.search(
                query, max_results=count, timeout=self._settings.timeout_seconds
            )
        except SearchError:
            raise
        except (TavilyTimeout, *self._timeout_errors):
            raise timeout_error(self.name, self._settings.timeout_seconds) from None
        except Exception as exc:
            raise SearchError(f"web_search: tavily failed: {clip(str(exc), 200)}") from None
        items = data.get("results") if isinstance(data, dict) else None
        return [
            SearchResult(
                title=clip(str(item.get("title") or item.get("url")), 200),
                url=str(item["url"]),
                snippet=clip(str(item.get("content") or "")),
                published=str(item["published_date"]) if item.get("published_date") else None,
            )
            for item in items or ()
            if isinstance(item, dict) and item.get("url")
        ][:count]

    async def aclose(self) -> None:
        await self._http.aclose()


class LinkupProvider:
    """The Linkup search API (`linkup-sdk`)."""

    name = "linkup"

    def __init__(self, settings: SearchSettings) -> None:
        try:
            from linkup import LinkupClient
        except ImportError:
            raise missing_extra("linkup") from None
        self._settings = settings
        self._client = LinkupClient(api_key=settings.api_key, base_url=settings.base_url)

    async def search(self, query: str, count: int) -> list[SearchResult]:
        import linkup

        try:
            answer = await self._client.async_search(
                query,
                depth="standard",
                output_type="searchResults",
                max_results=count,
                timeout=self._settings.timeout_seconds,
            )
        except linkup.LinkupNoResultError:
            return []
        except linkup.LinkupAuthenticationError:
            raise status_error(self.name, 401, None) from None
        except (
            linkup.LinkupTooManyRequestsError,
            linkup.LinkupInsufficientCreditError,
            linkup.LinkupBudgetLimitExceededError,
        ):
            raise status_error(self.name, 429, None) from None
        except (linkup.LinkupTimeoutError, linkup.LinkupRequestDeadlineExceededError):
            raise timeout_error(self.name, self._settings.timeout_seconds) from None
        except Exception as exc:
            raise SearchError(f"web_search: linkup failed: {clip(str(exc), 200)}") from None
        results = getattr(answer, "results", None) or ()
        return [
            SearchResult(title=clip(r.name, 200), url=r.url, snippet=clip(r.content))
            for r in results
            if getattr(r, "type", "") == "text"
        ][:count]

    async def aclose(self) -> None:
        """Linkup opens a connection per call: nothing to release."""
