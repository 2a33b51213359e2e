"""The gateway: one long-running process that owns sessions, MCP connections and suspended
code-mode runs, and that every client talks to.

- `create_app(runtime, settings)`: the ASGI app (web page, OpenAI-compatible API,
  `/tools/invoke`, the `/ws` WebSocket protocol, `/health`).
- `run_gateway(...)`: open the runtime and serve it with uvicorn until asked to stop.
- `BackgroundGateway`: the same, on a background thread (tests, benchmarks, embedding).
- `nodmix.gateway.client.run_remote`: `nodmix agent` through a running gateway.

The protocol is documented in docs/gateway.md. Importing this package is cheap; the
submodules load Starlette and uvicorn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodmix.gateway.app import create_app
    from nodmix.gateway.background import BackgroundGateway
    from nodmix.gateway.server import run_gateway
    from nodmix.gateway.settings import GatewaySettings, resolve_settings

_LAZY = {
    "create_app": "nodmix.gateway.app",
    "BackgroundGateway": "nodmix.gateway.background",
    "run_gateway": "nodmix.gateway.server",
    "GatewaySettings": "nodmix.gateway.settings",
    "resolve_settings": "nodmix.gateway.settings",
}

__all__ = ["BackgroundGateway", "GatewaySettings", "create_app", "resolve_settings", "run_gateway"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.gateway' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
