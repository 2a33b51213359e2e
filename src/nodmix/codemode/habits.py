"""Globals that model-written programs expect and QuickJS lacks: `console`, timers and `sleep`.

`console.log/info/debug/warn/error/dir/table/...` format their arguments the way Node does
(strings as they are, other values through a small `util.inspect`) and append one `text`
output entry per call, in order with `text()`/`json()`. Timers (`setTimeout`, `setInterval`,
their `clear*` and `sleep(ms)`) are host requests: the host arms them on its clock, delivers
them like nested tool results, and a timer still pending when the step's budget ends suspends
the run like a pending call (`wait` continues it). `clearTimeout` tells the host at once, so a
cleared timer never keeps a run waiting. An exception thrown by a timer callback is printed as
an `Uncaught ...` text entry (the program itself keeps running).

The web globals (`structuredClone`, `TextEncoder`/`TextDecoder`, `URL`/`URLSearchParams`) are
installed lazily (see `js/webapi.js`): their code is compiled with the rest of the setup script
and cached as bytecode, but nothing is built until a program first reads the global, so a
fresh cell pays almost nothing for them. `queueMicrotask`, `atob`/`btoa` and `performance` are
QuickJS's own.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

MAX_TIMERS: Final = 1000
"""Timers a program may have armed at once (a setTimeout past that throws a RangeError)."""


def _script(name: str) -> str:
    return resources.files("nodmix.codemode").joinpath("js", name).read_text(encoding="utf-8")


HABITS_SCRIPT: Final = (
    _script("habits.js")
    .replace("/*INSPECT*/", _script("inspect.js"))
    .replace("/*WEBAPI*/", _script("webapi.js"))
    .replace("/*MAX_TIMERS*/", str(MAX_TIMERS))
)
"""A function expression `(globalThis, call, request)` run by the guest setup script."""
