"""Pinned files from registry packages, fetched on demand, hash-verified and cached.

Nothing third-party is committed to the repository: a file Nodmix needs from an npm package
(the web page's Markdown renderer, its HTML sanitizer) is named here by package, version,
tarball integrity and the file's own sha256, and installed into the user cache dir.

The npm installer loads on first access, so modules that only need `nodmix.assets.files`
(private directories, atomic writes) do not import tarball handling.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'nodmix.assets' has no attribute {name!r}")
    value = getattr(importlib.import_module("nodmix.assets.npm"), name)
    globals()[name] = value
    return value
