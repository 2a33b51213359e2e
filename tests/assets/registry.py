"""A local npm-like registry for tests: a real HTTP server serving tarballs the test builds."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def make_tarball(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    """A gzipped tarball with `members`, plus a symlink to /etc/passwd named `symlink`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return buffer.getvalue()


def integrity_of(data: bytes) -> str:
    """The npm `dist.integrity` string of `data`."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


@contextmanager
def serve_registry() -> Iterator[tuple[str, dict[str, bytes]]]:
    """Yield (base URL, {path: body}); a path not in the dict answers 404."""
    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", served
    finally:
        server.shutdown()
        server.server_close()
