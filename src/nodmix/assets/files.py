"""Private cache directories and atomic file writes, for everything Nodmix caches."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and its missing parents with mode 0700, and refuse directories other users
    control. Parents that exist keep their mode (`Path.mkdir(parents=True)` would give the
    missing ones the umask's mode, 0755 with the usual umask)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    st = path.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PermissionError(f"{path} is not owned by the current user")
    if st.st_mode & 0o022:
        with contextlib.suppress(OSError):
            path.chmod(0o700)
        if path.stat().st_mode & 0o022:
            raise PermissionError(f"{path} is writable by other users")
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so readers see either the old file or the complete new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
