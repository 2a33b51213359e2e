"""`GET /metrics`: the runtime's counters in the Prometheus text format (token required)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from nodmix.observability.metrics import CONTENT_TYPE


async def metrics(request: Request) -> Response:
    """The metrics of the runtime behind this gateway."""
    from nodmix.gateway.state import gateway_of

    runtime = gateway_of(request).runtime
    return Response(runtime.observer.enable_metrics().render(), media_type=CONTENT_TYPE)
