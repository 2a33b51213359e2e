"""One TLS client context for the channels of a gateway.

A verifying context holds the parsed CA certificates: about 0.8 MB and 50 ms per context
built. A platform client that accepts a context gets this one, so a gateway pays for it once
however many bots it runs, instead of once per HTTP client (the Telegram adapter has two per
bot). The aiohttp-based libraries (Matrix, Discord, Slack) already share aiohttp's own.

It is the context httpx builds by default, so it trusts what the Telegram channel's clients
trusted on their own: certifi's CA bundle, or the file or directory named by `SSL_CERT_FILE` /
`SSL_CERT_DIR`. The HTTP/1.1 clients that use it set its ALPN list to `http/1.1` on each
connection, so it is not meant for an HTTP/2 client.
"""

from __future__ import annotations

import ssl


class ClientTls:
    """Builds the shared context on first use (a gateway without such a channel pays
    nothing, not even the import of httpx)."""

    def __init__(self) -> None:
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext:
        """The verifying client context, built once."""
        if self._context is None:
            import httpx

            self._context = httpx.create_ssl_context()
        return self._context
