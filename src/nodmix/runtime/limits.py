"""Process limits: make the most of the open-file limit the system allows.

Many systems start processes with a soft `RLIMIT_NOFILE` of 1024 while allowing far more (the
hard limit). The gateway holds a socket per client connection plus a few dozen files, so the
soft limit is raised to the hard limit at start-up (capped, so a huge hard limit does not make
`select`-based libraries or child processes pay for it). Nothing here is fatal: a limit that
cannot be changed is left as it is.
"""

from __future__ import annotations

import logging

log = logging.getLogger("nodmix.runtime")

MAX_OPEN_FILES = 65536
"""The highest soft limit Nodmix asks for, even when the hard limit is higher."""


def raise_open_file_limit(cap: int = MAX_OPEN_FILES) -> int | None:
    """Raise the soft open-file limit towards the hard limit; return the soft limit in force.

    Returns None where the platform has no `resource` module (Windows).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. a sandbox that forbids it
            log.debug("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft
