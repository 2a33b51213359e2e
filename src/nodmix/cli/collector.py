"""The cyclic garbage collector during a command's start-up.

Starting `nodmix agent` or `nodmix gateway` creates tens of thousands of objects that live as
long as the process (modules, classes, config schemas, compiled patterns). The collector
examines them again and again while they are being created and finds next to nothing: about
a hundred collections before the agent's first model request, a tenth of that start-up on
this project's test machine. For those commands `main` pauses it, and the command resumes it
once its runtime is built or it has reached a gateway: the start-up objects are then frozen
(never examined again) and what turns create is collected as usual.

Only a process start pauses it (`main()` reading `sys.argv`); `main([...])` called in process,
as the tests do, leaves the collector alone. The `gateway` service actions (`install`,
`status`, ...) never resume it: they end within moments.
"""

from __future__ import annotations

import argparse
import gc

PAUSING_COMMANDS = frozenset({"agent", "gateway"})
"""Commands whose start-up time matters (a turn, the gateway's first answer)."""


def pause(command: str | None) -> bool:
    """Pause the collector for `command`'s start-up; True when it was paused."""
    if command not in PAUSING_COMMANDS or not gc.isenabled():
        return False
    gc.disable()
    return True


def resume(args: argparse.Namespace) -> None:
    """End the start-up pause this process began (a no-op without one, or the second time)."""
    if getattr(args, "collector_paused", False):
        args.collector_paused = False
        gc.freeze()
        gc.enable()
