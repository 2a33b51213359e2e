"""What the code-mode benchmark needs to measure under load and to say how calls were served.

`one_cpu_busy()` starts a separate process that spins on one CPU (the last of this process's
affinity mask) for the duration of a block, the way another program keeping a core busy would;
`Served` counts how a cell's awaited calls reached their results: run on the sandbox worker
(`worker`, a quick tool), or through the event loop, woken by a listening loop (`listen`), a
spin (`spin`) or a lock (`lock`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

from nodmix.codemode.quick import quick_counts
from nodmix.sandbox.rendezvous import wake_counts

BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"


@contextlib.contextmanager
def one_cpu_busy() -> Iterator[int | None]:
    """Keep one CPU busy with another process for the block; yields the CPU, or None when this
    process may use only one (nothing is started: there is no second CPU to keep busy)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        yield None
        return
    cpu = cpus[-1]
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(cpu)])
    try:
        time.sleep(0.2)  # let it start spinning before anything is measured
        yield cpu
    finally:
        busy.kill()
        busy.wait()


PATHS = ("worker", "listen", "spin", "lock", "timeout")


class Served:
    """How awaited calls were served between `Served()` and `per(cells)`."""

    def __init__(self) -> None:
        self._start = self._now()

    @staticmethod
    def _now() -> dict[str, int]:
        return {"worker": quick_counts.ran, **wake_counts.as_dict()}

    def per(self, cells: int) -> dict[str, float]:
        """Per cell, by path, since this object was made."""
        now = self._now()
        return {path: (now[path] - self._start[path]) / max(cells, 1) for path in PATHS}


def describe(paths: dict[str, float]) -> str:
    """`worker 100` or `listen 96 · spin 3 · lock 1` (per cell, paths that served any)."""
    parts = [f"{name} {count:.0f}" for name, count in paths.items() if count >= 0.5]
    return " · ".join(parts) or "none"
