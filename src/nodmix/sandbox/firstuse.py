"""Fetch the sandbox runtime on first use, so code mode works right after a plain install.

`ensure_installed()` is what code mode calls before it builds its tools: when `quickjs.wasm` is
not in the cache it downloads, verifies and precompiles it (the same pinned, hash-checked path
as `nodmix sandbox install`), announcing it in one line first. Only when that fails (offline,
registry unreachable, hash mismatch) does code mode fail closed, with the one-line fix. A file
that is present but corrupt is never replaced silently: that needs `--force` from the user.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.sandbox import assets

#: Seconds for connecting and for each read of the first-use download.
CONNECT_TIMEOUT: Final = 15.0
#: Seconds for the whole first-use download (the tarball is about 300 KB).
TOTAL_TIMEOUT: Final = 90.0

_lock = threading.Lock()


def ensure_installed(
    announce: Callable[[str], None] | None = None,
    *,
    root: Path | None = None,
    registry: str | None = None,
) -> bool:
    """Make sure the runtime is installed; fetch it now if it is missing (blocking).

    Concurrent callers (several first turns of a gateway) share one download.

    Args:
        announce: Receives one line before a download starts (e.g. printed on stderr).
        root: Cache root (default `assets.cache_root()`).
        registry: npm registry base URL (default `$NODMIX_NPM_REGISTRY` or npmjs).

    Returns:
        True if the runtime was downloaded by this call, False if it was already there.

    Raises:
        RuntimeUnavailableError: The runtime is corrupt, or fetching it failed; the message
            says what happened and which command fixes it.
    """
    report = assets.status(root)
    if report.installed:
        return False
    with _lock:
        report = assets.status(root)
        if report.installed:
            return False
        if report.present:
            raise RuntimeUnavailableError(
                f"the QuickJS-WASI runtime at {report.wasm_path} is corrupt (sha256 mismatch); "
                f"{assets.FORCE_HINT}"
            )
        url = assets.tarball_url(registry)
        if announce is not None:
            announce(
                f"nodmix: first use of code mode: fetching its sandbox runtime "
                f"{assets.PACKAGE}@{assets.VERSION} from {url} (one time)"
            )
        try:
            assets.install(
                root=root, registry=registry, timeout=CONNECT_TIMEOUT, total=TOTAL_TIMEOUT
            )
        except RuntimeUnavailableError:
            raise
        except SandboxError as exc:
            raise RuntimeUnavailableError(
                f"fetching the QuickJS-WASI runtime failed ({exc}); "
                f"{assets.FIX_HINT} when the network is back"
            ) from None
        except OSError as exc:
            raise RuntimeUnavailableError(
                f"the QuickJS-WASI runtime cannot be stored in {report.wasm_path.parent} "
                f"({exc.strerror or exc}); set NODMIX_CACHE_DIR to a writable folder"
            ) from None
    return True
