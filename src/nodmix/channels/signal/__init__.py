"""Signal through a signal-cli daemon's JSON-RPC interface (HTTP + SSE, or a UNIX socket)."""
