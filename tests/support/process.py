"""What a running process holds, read from Linux `/proc` (tests and benchmarks of the gateway)."""

from __future__ import annotations

import stat
from pathlib import Path


def rss_kb(pid: int) -> int:
    """The process's resident memory (`VmRSS`) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status (Linux only)")


def open_files(pid: int) -> tuple[int, int]:
    """(descriptors that are not sockets, sockets) of the process."""
    files = sockets = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            mode = fd.stat().st_mode
        except OSError:  # closed while we looked
            continue
        if stat.S_ISSOCK(mode):
            sockets += 1
        else:
            files += 1
    return files, sockets
