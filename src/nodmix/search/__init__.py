"""Web search: the `web_search` tool over a configured provider (`tools.web.search`).

Providers: SearXNG and Brave over httpx2, Tavily and Linkup through their own client libraries
(the `nodmix[tavily]` and `nodmix[linkup]` extras). Answers are cached per query for a short
time; a failure (a rejected key, a rate limit, a timeout) is one line for the model and the user.
"""

from nodmix.search.base import SearchError, SearchProvider, SearchResult
from nodmix.search.settings import SearchSettings, resolve_search
from nodmix.search.tool import WebSearchTool

__all__ = [
    "SearchError",
    "SearchProvider",
    "SearchResult",
    "SearchSettings",
    "WebSearchTool",
    "resolve_search",
]
