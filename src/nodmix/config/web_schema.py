"""`tools.web.search` and `tools.browser`: web search providers and the real browser."""

from typing import Annotated, Literal

import msgspec

from nodmix.config.section import Section

SearchProviderName = Literal["searxng", "brave", "tavily", "linkup"]


class WebSearchConfig(Section, frozen=True):
    """`tools.web.search`: the provider behind the `web_search` tool (unset: no tool)."""

    provider: SearchProviderName | None = None
    """`searxng` (self-hosted, no key), `brave`, `tavily` or `linkup`."""
    api_key: str | None = None
    """A literal key or `${ENV_VAR}`; when unset, `BRAVE_API_KEY`, `TAVILY_API_KEY` or
    `LINKUP_API_KEY` (searxng needs none)."""
    base_url: str | None = None
    """The provider's address; required for searxng (your instance), optional otherwise."""
    max_results: Annotated[int, msgspec.Meta(ge=1, le=20)] | None = None
    """Results when a call names no `count` (default 5)."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """How long one search may take (default 15)."""
    cache_seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None
    """How long an answer is reused for the same query and count (default 300; 0: never)."""


class WebToolsConfig(Section, frozen=True):
    """`tools.web`."""

    search: WebSearchConfig | None = None


class BrowserToolConfig(Section, frozen=True):
    """`tools.browser`: a real Chromium the agent drives (Playwright, `nodmix[browser]`)."""

    enabled: bool | None = None
    """Offer the `browser` tool (default false)."""
    executable_path: str | None = None
    """The Chromium to launch (default: `chromium` on PATH, Debian's `/usr/bin/chromium`)."""
    cdp_url: str | None = None
    """Use a browser already running elsewhere over CDP (`http://host:9222`) instead."""
    headless: bool | None = None
    """Run without a window (default true)."""
    allow_private_network: bool | None = None
    """Let pages reach loopback, link-local and private addresses (default false)."""
    allow_hosts: list[str] = []
    """Host names (or `*.example.lan`) the page may reach even when they are private."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """How long one action (a navigation, a click and its page load) may take (default 30)."""
    max_tabs: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    """Open tabs per browser at most (default 8)."""
    idle_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Close a browser nobody used for this long (default 300)."""
    max_download_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Largest download saved to the workspace (default 50 MiB); larger ones are cancelled."""
    max_snapshot_chars: Annotated[int, msgspec.Meta(ge=1000)] | None = None
    """Longest page snapshot returned to the model (default 40000 characters)."""
