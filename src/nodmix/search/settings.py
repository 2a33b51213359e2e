"""`tools.web.search` resolved: which provider, its key and address, or why there is none."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import ToolsConfig
from nodmix.errors import ConfigError

DEFAULT_MAX_RESULTS = 5
DEFAULT_TIMEOUT_SECONDS = 15.0
DEFAULT_CACHE_SECONDS = 300.0

KEY_VARIABLES = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY", "linkup": "LINKUP_API_KEY"}
"""The variable read when `apiKey` is unset."""

DEFAULT_BASE_URLS = {
    "brave": "https://api.search.brave.com",
    "tavily": "https://api.tavily.com",
    "linkup": "https://api.linkup.so/v1",
}


class SearchSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A usable search provider."""

    provider: str
    base_url: str
    api_key: str | None = None
    max_results: int = DEFAULT_MAX_RESULTS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    cache_seconds: float = DEFAULT_CACHE_SECONDS


class SearchUnavailable(msgspec.Struct, frozen=True):
    """Why `web_search` is not offered (for `doctor` and `security audit`)."""

    reason: str


def resolve_search(
    tools: ToolsConfig, env: Mapping[str, str]
) -> SearchSettings | SearchUnavailable:
    """The provider `tools.web.search` names, or why `web_search` is not offered."""
    section = tools.web.search if tools.web is not None else None
    if section is None or section.provider is None:
        return SearchUnavailable(
            "no search provider: set tools.web.search.provider (searxng, brave, tavily or "
            "linkup) to offer web_search"
        )
    provider = section.provider
    try:
        key = resolve_secret(section.api_key, key="tools.web.search.apiKey", env=env)
    except ConfigError as exc:
        return SearchUnavailable(f"web_search is off: {exc}")
    variable = KEY_VARIABLES.get(provider)
    if key is None and variable is not None:
        key = env.get(variable) or None
        if key is None:
            return SearchUnavailable(
                f"web_search is off: {provider} needs an API key (tools.web.search.apiKey "
                f"or {variable})"
            )
    base_url = (section.base_url or DEFAULT_BASE_URLS.get(provider, "")).rstrip("/")
    if not base_url:
        return SearchUnavailable(
            "web_search is off: searxng needs tools.web.search.baseUrl (your instance, "
            "e.g. http://127.0.0.1:8888)"
        )
    if not base_url.startswith(("http://", "https://")):
        return SearchUnavailable(
            f"web_search is off: tools.web.search.baseUrl {base_url!r} is not an http(s) URL"
        )
    return SearchSettings(
        provider=provider,
        base_url=base_url,
        api_key=key,
        max_results=section.max_results or DEFAULT_MAX_RESULTS,
        timeout_seconds=section.timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
        cache_seconds=(
            DEFAULT_CACHE_SECONDS if section.cache_seconds is None else section.cache_seconds
        ),
    )
