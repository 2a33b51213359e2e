"""`web_search` and `browser` as a tool source: offered when `tools.web.search` names a usable
provider and when `tools.browser.enabled` is true, rebuilt when a reload changes them.

Nothing of the browser or the search providers is imported until one is configured."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.config.schema import NodmixConfig
from nodmix.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from nodmix.browser.tool import BrowserTool
    from nodmix.search.tool import WebSearchTool


class WebTools:
    """The runtime's web tools (one browser service per process)."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        *,
        env: Mapping[str, str],
        state_dir: Path,
        sandboxed: Callable[[ToolContext], bool],
    ) -> None:
        self._config = config
        self._env = env
        self._state_dir = state_dir
        self._sandboxed = sandboxed
        self._search: tuple[Any, WebSearchTool | None] = (None, None)
        self._browser: tuple[Any, BrowserTool | None] = (None, None)
        self._retired: list[WebSearchTool | BrowserTool] = []

    async def list_tools(self) -> Sequence[Tool]:
        tools = self._config().tools
        found: list[Tool] = []
        if tools.web is not None and tools.web.search is not None:
            search = self._search_tool()
            if search is not None:
                found.append(search)
        if tools.browser is not None and tools.browser.enabled:
            browser = self._browser_tool()
            if browser is not None:
                found.append(browser)
        return found

    def _search_tool(self) -> WebSearchTool | None:
        from nodmix.search import SearchSettings, WebSearchTool, resolve_search

        settings = resolve_search(self._config().tools, self._env)
        key, tool = self._search
        if settings == key:
            return tool
        if tool is not None:
            self._retired.append(tool)
        tool = WebSearchTool(settings) if isinstance(settings, SearchSettings) else None
        self._search = (settings, tool)
        return tool

    def _browser_tool(self) -> BrowserTool | None:
        from nodmix.browser.settings import resolve_browser

        settings = resolve_browser(self._config().tools.browser)
        key, tool = self._browser
        if settings == key:
            return tool
        if tool is not None:
            self._retired.append(tool)
        if settings is None:
            tool = None
        else:
            from nodmix.browser.tool import BrowserTool

            tool = BrowserTool(settings, self._state_dir, sandboxed=self._sandboxed)
        self._browser = (settings, tool)
        return tool

    async def aclose(self) -> None:
        """Close the browsers and the providers' connections."""
        for tool in (*self._retired, self._search[1], self._browser[1]):
            if tool is not None:
                await tool.aclose()
        self._retired.clear()


def open_web_tools(runtime: Any, stack: AsyncExitStack) -> WebTools:
    """Add the web tools to the runtime's tool sources, closed with `stack`; a sandboxed
    session (the agent's `sandbox.mode`) is told apart as the sandbox itself tells it."""

    def sandboxed(ctx: ToolContext) -> bool:
        from nodmix.runtime.toolset import agent_isolation

        isolation = agent_isolation(runtime.agent(ctx.agent_id))
        return isolation is not None and isolation.applies(ctx)

    tools = WebTools(
        lambda: runtime.config, env=runtime.env, state_dir=runtime.state_dir, sandboxed=sandboxed
    )
    runtime.tool_sources.append(tools)
    stack.push_async_callback(tools.aclose)
    return tools
