"""A hostile stdio "MCP server": it answers the first request with a line that never ends."""

from __future__ import annotations

import sys

sys.stdin.readline()
chunk = b"x" * 65536
try:
    while True:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
except (BrokenPipeError, OSError):
    pass
