"""SearXNG and Brave over httpx2 (neither has a maintained async client library).

- SearXNG: `GET {baseUrl}/search?q=...&format=json` -> `results[].title/url/content` (and
  `publishedDate`); the instance must have the JSON format enabled (`search.formats`).
- Brave: `GET {baseUrl}/res/v1/web/search?q=...&count=N` with `X-Subscription-Token` ->
  `web.results[].title/url/description` (and `page_age`).
"""

from __future__ import annotations

import html
import re
from typing import Any

import httpx2
import msgspec

from nodmix.search.base import SearchError, SearchResult, clip, status_error, timeout_error
from nodmix.search.settings import SearchSettings

_MAX_BODY_BYTES = 4 * 1024 * 1024
_USER_AGENT = "Nodmix/0.1 (web_search)"
_TAG = re.compile(r"<[^>]{0,200}>")


class _HttpProvider:
    name = ""
    path = ""

    def __init__(self, settings: SearchSettings) -> None:
        self._settings = settings
        self._client = httpx2.AsyncClient(
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            headers={"Accept": "application/json", "User-Agent": _USER_AGENT, **self.headers()},
            follow_redirects=True,
        )

    def headers(self) -> dict[str, str]:
        return {}

    def params(self, query: str, count: int) -> dict[str, str | int]:
        raise NotImplementedError

    def results(self, data: Any) -> list[SearchResult]:
        raise NotImplementedError

    async def search(self, query: str, count: int) -> list[SearchResult]:
        try:
            async with self._client.stream(
                "GET", self.path, params=self.params(query, count)
            ) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_BODY_BYTES:
                        raise SearchError(
                            f"web_search: {self.name} answered more than "
                            f"{_MAX_BODY_BYTES // 1024 // 1024} MiB; refused."
                        )
        except httpx2.TimeoutException:
            raise timeout_error(self.name, self._settings.timeout_seconds) from None
        except httpx2.HTTPError as exc:
            raise SearchError(
                f"web_search: cannot reach {self.name} at {self._settings.base_url}: {exc}"
            ) from None
        if response.status_code >= 400:
            raise status_error(
                self.name,
                response.status_code,
                response.headers.get("retry-after"),
                bytes(body[:2000]).decode("utf-8", "replace"),
            )
        try:
            data = msgspec.json.decode(bytes(body))
        except msgspec.DecodeError:
            raise SearchError(
                f"web_search: {self.name} did not answer JSON"
                + (
                    " (enable the json format in its settings.yml)"
                    if self.name == "searxng"
                    else ""
                )
            ) from None
        return self.results(data)[:count]

    async def aclose(self) -> None:
        await self._client.aclose()


def _items(data: Any, *path: str) -> list[dict[str, Any]]:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return [item for item in data or () if isinstance(item, dict)] if isinstance(data, list) else []


def _plain(text: Any) -> str:
    """Brave marks matches with `<strong>`; entities are escaped."""
    return html.unescape(_TAG.sub("", str(text or "")))


def _result(item: dict[str, Any], snippet_key: str, date_keys: tuple[str, ...]) -> SearchResult:
    published = next((str(item[k]) for k in date_keys if item.get(k)), None)
    return SearchResult(
        title=clip(_plain(item.get("title") or item.get("url")), 200),
        url=str(item.get("url") or ""),
        snippet=clip(_plain(item.get(snippet_key))),
        published=published,
    )


class SearxngProvider(_HttpProvider):
    """A SearXNG instance (self-hosted, no key)."""

    name = "searxng"
    path = "/search"

    def params(self, query: str, count: int) -> dict[str, str | int]:
        return {"q": query, "format": "json"}

    def results(self, data: Any) -> list[SearchResult]:
        return [
            _result(item, "content", ("publishedDate",))
            for item in _items(data, "results")
            if item.get("url")
        ]


class BraveProvider(_HttpProvider):
    """The Brave Search API."""

    name = "brave"
    path = "/res/v1/web/search"

    def headers(self) -> dict[str, str]:
        return {"X-Subscription-Token": self._settings.api_key or ""}

    def params(self, query: str, count: int) -> dict[str, str | int]:
        return {"q": query, "count": count}

    def results(self, data: Any) -> list[SearchResult]:
        return [
            _result(item, "description", ("page_age", "age"))
            for item in _items(data, "web", "results")
            if item.get("url")
        ]
