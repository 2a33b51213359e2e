"""How many `POST /media/upload` bodies the gateway receives at once.

An upload may be as large as `channels.defaults.maxAttachmentBytes` (20 MB by default) and is
held in memory until it is checked and saved, so the number received at once bounds the
memory (and the disk writes) uploads can take, whatever the number of clients:

- `gateway.maxConcurrentUploads` (default 8) for the whole gateway: one more gets `503`
  (`uploads_busy`);
- `gateway.maxUploadsPerClient` (default 4) for one client address: one more gets `429`
  (`too_many_uploads`), so a single client cannot take every slot.

Both are refused before one byte of the body is read, with `Retry-After` and
`connection: close` (the unread body makes the connection useless); the web page retries
them. The limits are read from the config at each upload, so a reload changes them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from nodmix.gateway.errors import APIError

log = logging.getLogger("nodmix.gateway")

DEFAULT_MAX_CONCURRENT_UPLOADS: Final = 8
DEFAULT_MAX_UPLOADS_PER_CLIENT: Final = 4
RETRY_AFTER_SECONDS: Final = 1


class UploadSlotsMiddleware:
    """Counts the uploads being received (`path`, POST) and refuses those beyond the caps
    `limits()` returns: `(gateway-wide, per client address)`."""

    def __init__(self, app: ASGIApp, *, path: str, limits: Callable[[], tuple[int, int]]) -> None:
        self.app = app
        self.path = path
        self.limits = limits
        self.active = 0
        self.per_client: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        total, per_client = self.limits()
        client = str((scope.get("client") or ("unknown",))[0])
        refusal = None
        if self.active >= total:
            refusal = APIError(
                status=503,
                message=f"the gateway is receiving {self.active} uploads already; retry "
                "shortly (gateway.maxConcurrentUploads)",
                kind="api_error",
                code="uploads_busy",
            )
        elif self.per_client[client] >= per_client:
            refusal = APIError(
                status=429,
                message=f"{self.per_client[client]} uploads from this client are still being "
                "received; wait for one to finish (gateway.maxUploadsPerClient)",
                kind="rate_limit_error",
                code="too_many_uploads",
            )
        if refusal is not None:
            log.info("refusing an upload from %s: %s", client, refusal.message)
            response = refusal.response()
            response.headers["retry-after"] = str(RETRY_AFTER_SECONDS)
            response.headers["connection"] = "close"
            await response(scope, receive, send)
            return
        self.active += 1
        self.per_client[client] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.per_client[client] -= 1
            if self.per_client[client] <= 0:
                del self.per_client[client]
