"""The gateway's ASGI app: `create_app(runtime, settings)` (the state its routes share is
`state.py`).

The app serves an already open `Runtime` (the CLI opens it around uvicorn, and closes it, with
its MCP servers and code-mode engine, after the server stopped). The app's lifespan owns what
belongs to serving: the task group that runs turns (drained on shutdown) and the config
watcher.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from nodmix.gateway.auth import GuardMiddleware
from nodmix.gateway.automation import serve_automation
from nodmix.gateway.channel_turns import (
    GatewayTurns,
    channel_webhook_routes,
    verification_paths,
)
from nodmix.gateway.errors import APIError, classify
from nodmix.gateway.limits import BodyLimitMiddleware
from nodmix.gateway.settings import GatewaySettings
from nodmix.gateway.state import Gateway, api_route, gateway_of, gateway_of_app
from nodmix.gateway.subagents import serve_subagents
from nodmix.gateway.upload_slots import UploadSlotsMiddleware
from nodmix.runtime import Runtime

STATIC_DIR = Path(__file__).parent / "static"
"""The web page (plain HTML, JS and CSS shipped as package data; nothing is built)."""


async def _health(request: Request) -> Response:
    return JSONResponse(gateway_of(request).health(detailed=False))


async def _http_error(request: Request, exc: Exception) -> Response:
    # Unknown paths and methods (and anything that escaped a route) answer in the same error
    # shape as everything else.
    if not isinstance(exc, HTTPException):
        return classify(exc).response()
    status = exc.status_code
    code = HTTP_CODES.get(status, "http_error")
    kind = "invalid_request_error" if status < 500 else "api_error"
    detail = exc.detail
    if status == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return APIError(status=status, message=str(detail), kind=kind, code=code).response()


HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 422: "unprocessable_entity"}


async def _index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})


async def _favicon(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")


class _Revalidated(StaticFiles):
    """Static files that browsers revalidate on every load (cheap with ETags), so an upgraded
    gateway never runs yesterday's script against today's protocol."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "no-cache"
        return response


def create_app(runtime: Runtime, settings: GatewaySettings) -> Starlette:
    """The gateway app for an open `runtime`.

    Its lifespan must run (uvicorn does that; in-process tests use
    `app.router.lifespan_context(app)`), because turns run in the task group it owns.
    """
    from nodmix.gateway.hooks_api import get_hook_run, hook_token, post_hook
    from nodmix.gateway.media_api import (
        UPLOAD_LIMIT_KEY,
        UPLOAD_PATH,
        media_file,
        upload,
        upload_limit,
        upload_slots,
    )
    from nodmix.gateway.metrics_api import metrics
    from nodmix.gateway.models_api import list_models, retrieve_model
    from nodmix.gateway.openai_api import chat_completions
    from nodmix.gateway.responses_api import create_response
    from nodmix.gateway.rpc import METHODS
    from nodmix.gateway.tools_api import invoke_tool
    from nodmix.gateway.webassets import vendor_script
    from nodmix.gateway.ws import websocket_endpoint

    gateway = Gateway(runtime, settings)
    runtime.observer.enable_metrics()  # served at /metrics

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with gateway.serving(
            lambda: runtime.channels.run(GatewayTurns(gateway)),
            lambda: serve_automation(gateway),
            lambda: serve_subagents(runtime.subagents, lambda: (gateway,)),  # every replica
        ):
            yield

    routes: list[BaseRoute] = [
        Route("/", _index, methods=["GET"]),
        Route("/health", _health, methods=["GET"]),
        Route("/v1/models", api_route(list_models), methods=["GET"]),
        Route("/v1/models/{model:path}", api_route(retrieve_model), methods=["GET"]),
        Route("/v1/chat/completions", api_route(chat_completions), methods=["POST"]),
        Route("/v1/responses", api_route(create_response), methods=["POST"]),
        Route("/tools/invoke", api_route(invoke_tool), methods=["POST"]),
        Route("/hooks/runs/{run_id}", api_route(get_hook_run), methods=["GET"]),
        Route("/hooks/{name}", api_route(post_hook), methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route(UPLOAD_PATH, api_route(upload), methods=["POST"]),
        Route("/media/file", api_route(media_file), methods=["GET"]),
        WebSocketRoute("/ws", websocket_endpoint(METHODS)),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/static/vendor/{name}", vendor_script, methods=["GET"]),
        Mount("/static", _Revalidated(directory=STATIC_DIR), name="static"),
    ]
    webhooks = channel_webhook_routes(gateway, routes)
    routes += webhooks
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                GuardMiddleware,
                token=settings.token,
                hook_token=lambda: hook_token(gateway),
                channel_paths=frozenset(route.path for route in webhooks),
                channel_get_paths=verification_paths(webhooks),
            ),
            Middleware(
                UploadSlotsMiddleware, path=UPLOAD_PATH, limits=lambda: upload_slots(gateway)
            ),
            Middleware(
                BodyLimitMiddleware,
                max_bytes=settings.max_body_bytes,
                timeout_seconds=settings.request_timeout_seconds,
                path_limits={UPLOAD_PATH: (lambda: upload_limit(gateway), UPLOAD_LIMIT_KEY)},
            ),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
    )
    app.state.gateway = gateway
    return app


__all__ = ["APIError", "Gateway", "create_app", "gateway_of", "gateway_of_app"]
