"""The web page's third-party scripts: a Markdown renderer and an HTML sanitizer from npm.

Nothing is committed or bundled: `marked` and `DOMPurify` are pinned by version, tarball
integrity and file sha256 (`nodmix.assets`), installed into the user cache by `make install`
(`nodmix web install`), or by the gateway at start when they are missing. The page loads them
from `/static/vendor/<name>`; until they are there it renders replies as plain text, never as
unsanitised HTML.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import anyio
from starlette.requests import Request
from starlette.responses import Response

from nodmix.assets import AssetError, PinnedFile, PinnedPackage, install_package, read_pinned
from nodmix.invocation import nodmix_command

log = logging.getLogger("nodmix.gateway")

MARKED: Final = PinnedPackage(
    name="marked",
    version="18.2.1",
    integrity="sha512-ii4bxCTCqqwpT86XZWgJNs+ZnAIZksmLGYMViWA7PDIXYIeNo1x6cDdX3JOip9NM/cI6p8z57FxliACboTruMA==",
    files=(
        PinnedFile(
            member="package/lib/marked.umd.js",
            name="marked.umd.js",
            sha256="bb95d4c15f1289f78486eaacebf3bb18688475ed58a040ef762ed49337090542",
        ),
        PinnedFile(
            member="package/LICENSE",
            name="LICENSE",
            sha256="8e3a3f82f59a60958f56ca08f445647c32a4733dc7ca6c2c46f6eb898471ab9c",
        ),
    ),
)
DOMPURIFY: Final = PinnedPackage(
    name="dompurify",
    version="3.4.18",
    integrity="sha512-ofe3wI/uNm68HInABYFJYqQxRw1EaKAjNdrFVKqjUY+UZurvNd2L/HuQe097s/4RivWiZyP6tT7aoT8atjfhwg==",
    files=(
        PinnedFile(
            member="package/dist/purify.min.js",
            name="purify.min.js",
            sha256="8053ee2a6a09f9d50f7fcd6fb7f07072f52c7f3fa9aa12147cab4feaf65ee970",
        ),
        PinnedFile(
            member="package/LICENSE",
            name="LICENSE",
            sha256="cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
        ),
    ),
)
PACKAGES: Final = (MARKED, DOMPURIFY)
SCRIPTS: Final = {"marked.js": (MARKED, "marked.umd.js"), "purify.js": (DOMPURIFY, "purify.min.js")}
"""URL name under `/static/vendor/` → (package, cached file)."""


def install(*, root: Path | None = None, force: bool = False, timeout: float = 30.0) -> list[str]:
    """Install every web asset; returns one line per package (what was done).

    Raises:
        AssetError: a package could not be downloaded or verified.
    """
    lines = []
    for package in PACKAGES:
        url = install_package(package, root=root, force=force, timeout=timeout)
        done = f"downloaded and verified from {url}" if url else "already installed"
        lines.append(f"{package.label}: {done} ({package.directory(root)})")
    return lines


def missing(root: Path | None = None) -> list[str]:
    """Labels of the packages whose files are not cached and verified."""
    return [
        package.label
        for package in PACKAGES
        if any(read_pinned(package, f.name, root=root) is None for f in package.files)
    ]


async def ensure_installed(root: Path | None = None) -> None:
    """At gateway start: fetch missing web assets in a worker thread; failures are a warning."""
    if not missing(root):
        return
    try:
        await anyio.to_thread.run_sync(lambda: install(root=root, timeout=20.0))
        log.info("web page: installed the Markdown renderer and sanitizer")
    except AssetError as exc:
        log.warning(
            "web page: %s; replies show as plain text (run `%s web install`)", exc, nodmix_command()
        )


_SERVED: dict[str, bytes] = {}


async def vendor_script(request: Request) -> Response:
    """`GET /static/vendor/{name}`: a verified cached script, else 404 (the page degrades)."""
    name = request.path_params["name"]
    entry = SCRIPTS.get(name)
    if entry is None:
        return Response("not found", status_code=404, media_type="text/plain")
    data = _SERVED.get(name)
    if data is None:
        package, file_name = entry
        data = read_pinned(package, file_name)
        if data is None:
            return Response("not installed", status_code=404, media_type="text/plain")
        _SERVED[name] = data
    return Response(
        data,
        media_type="text/javascript",
        headers={"cache-control": "public, max-age=86400"},
    )
