"""Pinned files from registry packages, fetched on demand, hash-verified and cached.

Nothing third-party is committed to the repository: a file Nodmix needs from an npm package
(the web page's Markdown renderer, its HTML sanitizer) is named here by package, version,
tarball integrity and the file's own sha256, and installed into the user cache dir.
"""

from nodmix.assets.npm import (
    AssetError,
    PinnedFile,
    PinnedPackage,
    cache_root,
    install_package,
    read_pinned,
)

__all__ = [
    "AssetError",
    "PinnedFile",
    "PinnedPackage",
    "cache_root",
    "install_package",
    "read_pinned",
]
