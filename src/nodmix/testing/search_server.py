"""A scripted web search service behind a real HTTP socket, in each provider's API shape.

`ScriptedSearchServer()` serves, on 127.0.0.1 and a free port, the search endpoints of:

- SearXNG: `GET /search?q=...&format=json` -> `{"results": [{title, url, content, ...}]}`;
- Brave: `GET /res/v1/web/search?q=...&count=N` (`X-Subscription-Token`) ->
  `{"web": {"results": [{title, url, description, page_age}]}}`;
- Tavily: `POST /search` `{query, max_results}` (`Authorization: Bearer`) ->
  `{"query", "results": [{title, url, content, score, published_date}]}`;
- Linkup: `POST /v1/search` `{q, depth, outputType, maxResults}` (`Authorization: Bearer`)
  -> `{"results": [{type: "text", name, url, content, favicon}]}`.

Point `tools.web.search.baseUrl` at `server.url` (Linkup: `server.url + "/v1"`). The hits are
`server.hits` (every query gets them, the query appended to each snippet), or a function of the
query in `server.answer`. Script failures with `server.fail(status, retry_after=...)` and a slow
service with `server.delay_seconds`. Every request is recorded in `server.requests`.

    with ScriptedSearchServer(hits=[Hit("Title", "https://example.com/", "snippet")]) as server:
        ...

From a shell: `python -m nodmix.testing.search_server --port 8899 --hit 'Title|https://...|text'`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodmix.testing.http_thread import ThreadedServer


class Hit(msgspec.Struct, frozen=True):
    """One scripted result."""

    title: str
    url: str
    snippet: str = ""
    published: str | None = None


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request the server received."""

    shape: str
    """`searxng`, `brave`, `tavily` or `linkup`."""
    query: str
    count: int | None
    key: str | None
    """The API key the request carried (header of the provider's shape)."""


DEFAULT_HITS = (
    Hit("Nodmix: a self-hosted assistant", "https://nodmix.example/", "Run your own assistant."),
    Hit("Example Domain", "https://example.com/", "This domain is for use in examples."),
)


class ScriptedSearchServer(ThreadedServer):
    """Answers every provider's search API shape from one scripted list of hits."""

    def __init__(
        self,
        hits: Sequence[Hit] = DEFAULT_HITS,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host=host, port=port)
        self.hits = list(hits)
        self.answer: Callable[[str], Sequence[Hit]] | None = None
        """When set, decides the hits for each query (instead of `hits`)."""
        self.api_key = api_key
        """When set, a request without this key gets 401."""
        self.delay_seconds = 0.0
        self.requests: list[SearchRequest] = []
        self._failure: tuple[int, str | None] | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://{self.host}:{self.port}"

    def fail(self, status: int | None, *, retry_after: str | None = None) -> None:
        """Answer every request with `status` (and `Retry-After`); `None` stops failing."""
        self._failure = None if status is None else (status, retry_after)

    def _hits(self, query: str, count: int | None) -> list[Hit]:
        hits = list(self.answer(query) if self.answer is not None else self.hits)
        return hits[: count or len(hits)]

    async def _prepare(
        self, shape: str, query: str, count: int | None, key: str | None
    ) -> Response | None:
        self.requests.append(SearchRequest(shape=shape, query=query, count=count, key=key))
        if self.delay_seconds:
            await anyio.sleep(self.delay_seconds)
        if self.api_key is not None and key != self.api_key:
            return _error(shape, 401, "invalid API key")
        if self._failure is not None:
            status, retry_after = self._failure
            response = _error(shape, status, "scripted failure")
            if retry_after is not None:
                response.headers["Retry-After"] = retry_after
            return response
        return None

    async def _searxng(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        if request.query_params.get("format") != "json":
            return Response("<html>format=json is required</html>", status_code=403)
        refused = await self._prepare("searxng", query, None, None)
        if refused is not None:
            return refused
        hits = self._hits(query, None)
        results = [
            {
                "title": h.title,
                "url": h.url,
                "content": _snippet(h, query),
                "publishedDate": h.published,
                "engine": "scripted",
            }
            for h in hits
        ]
        return JSONResponse({"query": query, "number_of_results": len(results), "results": results})

    async def _brave(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        count = _int(request.query_params.get("count"))
        key = request.headers.get("x-subscription-token")
        refused = await self._prepare("brave", query, count, key)
        if refused is not None:
            return refused
        results = [
            {
                "type": "search_result",
                "title": h.title,
                "url": h.url,
                "description": _snippet(h, query).replace(query, f"<strong>{query}</strong>"),
                **({"page_age": h.published} if h.published else {}),
            }
            for h in self._hits(query, count)
        ]
        return JSONResponse({"type": "search", "web": {"type": "search", "results": results}})

    async def _tavily(self, request: Request) -> Response:
        body = await _json(request)
        query = str(body.get("query", ""))
        count = _int(body.get("max_results"))
        refused = await self._prepare("tavily", query, count, _bearer(request))
        if refused is not None:
            return refused
        started = time.perf_counter()
        results = [
            {
                "title": h.title,
                "url": h.url,
                "content": _snippet(h, query),
                "score": round(1 - i / 10, 2),
                **({"published_date": h.published} if h.published else {}),
            }
            for i, h in enumerate(self._hits(query, count))
        ]
        took = round(time.perf_counter() - started, 3)
        return JSONResponse({"query": query, "results": results, "response_time": took})

    async def _linkup(self, request: Request) -> Response:
        body = await _json(request)
        query = str(body.get("q", ""))
        count = _int(body.get("maxResults"))
        refused = await self._prepare("linkup", query, count, _bearer(request))
        if refused is not None:
            return refused
        results = [
            {
                "type": "text",
                "name": h.title,
                "url": h.url,
                "content": _snippet(h, query),
                "favicon": "",
            }
            for h in self._hits(query, count)
        ]
        return JSONResponse({"results": results})

    def build_app(self) -> Starlette:
        """The routes of the four API shapes."""
        return Starlette(
            routes=[
                Route("/search", self._searxng, methods=["GET"]),
                Route("/search", self._tavily, methods=["POST"]),
                Route("/res/v1/web/search", self._brave, methods=["GET"]),
                Route("/v1/search", self._linkup, methods=["POST"]),
            ]
        )


def _snippet(hit: Hit, query: str) -> str:
    return f"{hit.snippet} ({query})" if hit.snippet else query


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:] if value.lower().startswith("bearer ") else None


async def _json(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.body())
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error(shape: str, status: int, message: str) -> JSONResponse:
    if shape == "linkup":
        codes = {401: "UNAUTHORIZED", 429: "TOO_MANY_REQUESTS"}
        body: Any = {"error": {"code": codes.get(status, "ERROR"), "message": message}}
    elif shape == "tavily":
        body = {"detail": {"error": message}}
    else:
        body = {"error": message, "status": status}
    return JSONResponse(body, status_code=status)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the default hits until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--hit",
        action="append",
        default=[],
        metavar="TITLE|URL|SNIPPET",
        help="a result every query gets (repeat for more; default: two example hits)",
    )
    args = parser.parse_args(argv)
    hits = [Hit(*(part.strip() for part in spec.split("|", 2))) for spec in args.hit]
    with ScriptedSearchServer(hits or DEFAULT_HITS, port=args.port) as server:
        print(f"listening on {server.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
