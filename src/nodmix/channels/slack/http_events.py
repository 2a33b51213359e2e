"""`mode: http`: the Slack Events API served on a local port (Bolt's Starlette handler under
uvicorn). Bolt verifies each request's signature with the signing secret and answers Slack's
`url_verification` challenge; events go to the same listeners as in Socket Mode."""

from __future__ import annotations

import uvicorn
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.app.async_app import AsyncApp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

EVENTS_PATH = "/slack/events"


def events_app(app: AsyncApp) -> Starlette:
    """A Starlette app with `POST /slack/events`."""
    handler = AsyncSlackRequestHandler(app)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    return Starlette(routes=[Route(EVENTS_PATH, events, methods=["POST"])])


async def serve_events(app: AsyncApp, host: str, port: int) -> None:
    """Serve the Events API until cancelled.

    Raises:
        OSError: the port cannot be bound.
    """
    config = uvicorn.Config(
        events_app(app), host=host, port=port, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    server.config.load()
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    if server.should_exit:  # startup failed (the port is taken)
        raise OSError(f"cannot listen on {host}:{port}")
    try:
        await server.main_loop()
    finally:
        await server.shutdown()
