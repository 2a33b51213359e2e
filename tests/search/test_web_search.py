"""`web_search` against the scripted search server in each provider's API shape: the hits, the
key each sends, the cache, and the one-line errors (rejected key, rate limit, timeout)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.config.schema import ToolsConfig
from nodmix.config.web_schema import WebSearchConfig, WebToolsConfig
from nodmix.errors import ToolError
from nodmix.search import SearchSettings, WebSearchTool, resolve_search
from nodmix.search.settings import SearchUnavailable
from nodmix.testing.search_server import Hit, ScriptedSearchServer
from nodmix.tools.base import ToolContext

PROVIDERS = ["searxng", "brave", "tavily", "linkup"]
HITS = [
    Hit("First <b>hit</b>", "https://one.example/", "The first one.", "2026-11-01"),
    Hit("Second", "https://two.example/", "The second one."),
    Hit("Third", "https://three.example/", "The third one."),
]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedSearchServer]:
    with ScriptedSearchServer(HITS) as running:
        yield running


@pytest.fixture(autouse=True)
def reset(server: ScriptedSearchServer) -> None:
    server.fail(None)
    server.api_key = None
    server.delay_seconds = 0
    server.requests.clear()


def _tool(server: ScriptedSearchServer, provider: str, **extra: float) -> WebSearchTool:
    base = server.url + ("/v1" if provider == "linkup" else "")
    key = None if provider == "searxng" else "key-1"
    return WebSearchTool(SearchSettings(provider=provider, base_url=base, api_key=key, **extra))


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        agent_id="main", session_key="agent:main:main", session_id="s", run_id="r", call_id="c",
        workspace=tmp_path,
    )  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_provider_returns_compact_hits_and_sends_its_key(
    server: ScriptedSearchServer, provider: str, tmp_path: Path
) -> None:
    tool = _tool(server, provider)
    try:
        result = await tool.call({"query": "lisbon  trains", "count": 2}, _ctx(tmp_path))
    finally:
        await tool.aclose()
    hits = result.details["results"]
    assert [h["url"] for h in hits] == ["https://one.example/", "https://two.example/"]
    assert hits[0]["title"] == ("First hit" if provider in ("searxng", "brave") else HITS[0].title)
    assert hits[0]["snippet"] == "The first one. (lisbon trains)"
    if provider in ("searxng", "brave", "tavily"):
        assert hits[0]["published"] == "2026-11-01"
    assert "1. " in result.text_content and "https://two.example/" in result.text_content
    assert "not instructions" in result.text_content
    request = server.requests[-1]
    assert (request.shape, request.query) == (provider, "lisbon trains")
    assert request.key == (None if provider == "searxng" else "key-1")
    if provider != "searxng":
        assert request.count == 2


@pytest.mark.anyio
async def test_the_same_query_is_answered_from_the_cache(
    server: ScriptedSearchServer, tmp_path: Path
) -> None:
    tool = _tool(server, "brave")
    try:
        first = await tool.call({"query": "Weather Lisbon"}, _ctx(tmp_path))
        second = await tool.call({"query": "weather lisbon"}, _ctx(tmp_path))
        other = await tool.call({"query": "weather porto"}, _ctx(tmp_path))
    finally:
        await tool.aclose()
    assert (first.details["cached"], second.details["cached"], other.details["cached"]) == (
        False, True, False,
    )  # fmt: skip
    assert [r.query for r in server.requests] == ["Weather Lisbon", "weather porto"]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_failures_are_one_clear_line(
    server: ScriptedSearchServer, provider: str, tmp_path: Path
) -> None:
    tool = _tool(server, provider, timeout_seconds=0.5, cache_seconds=0)
    lines = []
    try:
        if provider != "searxng":
            server.api_key = "the-right-key"
            with pytest.raises(ToolError) as rejected:
                await tool.search("q1", 3)
            lines.append(str(rejected.value))
            assert "rejected the API key (HTTP 401)" in lines[-1]
            server.api_key = None
        server.fail(429, retry_after="17")
        with pytest.raises(ToolError) as limited:
            await tool.search("q2", 3)
        lines.append(str(limited.value))
        assert "rate limit reached (HTTP 429)" in lines[-1]
        if provider != "linkup":  # the Linkup client drops the header
            assert "retry after 17 s" in lines[-1]
        server.fail(None)
        server.delay_seconds = 2
        with pytest.raises(ToolError) as slow:
            await tool.search("q3", 3)
        lines.append(str(slow.value))
        assert "did not answer within 0.5 s" in lines[-1]
    finally:
        await tool.aclose()
    assert all("\n" not in line and line.startswith(f"web_search: {provider}") for line in lines)


def test_without_a_provider_or_key_the_tool_is_off_and_says_why() -> None:
    none = resolve_search(ToolsConfig(), {})
    assert isinstance(none, SearchUnavailable) and "tools.web.search.provider" in none.reason

    def tools(**keys: str) -> ToolsConfig:
        return ToolsConfig(web=WebToolsConfig(search=WebSearchConfig(**keys)))  # type: ignore[arg-type]

    no_key = resolve_search(tools(provider="brave"), {})
    assert isinstance(no_key, SearchUnavailable) and "BRAVE_API_KEY" in no_key.reason
    unset = resolve_search(tools(provider="tavily", api_key="${MY_TAVILY}"), {})
    assert isinstance(unset, SearchUnavailable) and "MY_TAVILY" in unset.reason
    no_url = resolve_search(tools(provider="searxng"), {})
    assert isinstance(no_url, SearchUnavailable) and "baseUrl" in no_url.reason

    from_env = resolve_search(tools(provider="brave"), {"BRAVE_API_KEY": "k"})
    assert isinstance(from_env, SearchSettings) and from_env.api_key == "k"
    assert from_env.base_url == "https://api.search.brave.com"
    referenced = resolve_search(tools(provider="linkup", api_key="${LK}"), {"LK": "v"})
    assert isinstance(referenced, SearchSettings) and referenced.api_key == "v"
