"""Globals that model-written programs expect and QuickJS lacks: `console`, timers and `sleep`.

`console.log/info/debug/warn/error/dir/table/...` format their arguments the way Node does
(strings as they are, other values through a small `util.inspect`) and append one `text`
output entry per call, in order with `text()`/`json()`. Timers (`setTimeout`, `setInterval`,
their `clear*` and `sleep(ms)`) are host requests: the host arms them on its clock, delivers
them like nested tool results, and a timer still pending when the step's budget ends suspends
the run like a pending call (`wait` continues it). `clearTimeout` tells the host at once, so a
cleared timer never keeps a run waiting. An exception thrown by a timer callback is printed as
an `Uncaught ...` text entry (the program itself keeps running).

All of these, and the web globals (`structuredClone`, `TextEncoder`/`TextDecoder`,
`URL`/`URLSearchParams`, `js/web_*.js`), load on first read: the setup script only defines an
accessor per name; the first read asks the host for a `TrustedScript` (compiled once per
process, evaluated from bytecode) and replaces the accessor with a plain writable value. A fresh
cell that uses none of them pays for a few accessors, not for compiling and snapshotting ~600
lines of JavaScript.
`queueMicrotask`,
`atob`/`btoa` and `performance` are QuickJS's own. `SOURCES` also serves the guest setup's other
load-on-use scripts: the plugin/MCP namespace builder and `API.list`/`API.read` (`guest.py`).

Console lines are batched: the first line of a synchronous run crosses to the host at once
(so a program that logs and then spins until its timeout still shows it), later ones are sent
together at the next microtask checkpoint, before any other bridge crossing (so the order with
`text()`/`json()` and tool calls holds), or every 256 lines. A host crossing costs ~15 us; a
thousand `console.log` lines cost two.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

MAX_TIMERS: Final = 1000
"""Timers a program may have armed at once (a setTimeout past that throws a RangeError)."""


def _script(name: str) -> str:
    return resources.files("nodmix.codemode").joinpath("js", name).read_text(encoding="utf-8")


HABITS_SCRIPT: Final = _script("habits.js").replace("/*MAX_TIMERS*/", str(MAX_TIMERS))
"""A function expression `({call, request, rawCall, defer, stringify, setFlush})` returning
`console`, the timer functions and
`sleep`; the guest fetches it (`call('source', 'habits')`) the first time a program reads one."""

INSPECT_SCRIPT: Final = _script("inspect.js")
"""A function expression returning `{format, inspect}` (Node's formatting of values); the
console fetches it (`call('source', 'inspect')`) on the first value that is not a string or a
number."""

WEB_GLOBALS: Final = {
    "structuredClone": "web_clone",
    "TextEncoder": "web_text",
    "TextDecoder": "web_text",
    "URL": "web_url",
    "URLSearchParams": "web_url",
}
"""Each web global and the script (a `WEB_SCRIPTS` key) that builds it."""

WEB_SCRIPTS: Final = {name: _script(f"{name}.js") for name in ("web_clone", "web_text", "web_url")}
"""Function expressions returning a builder per web global, one script per group of globals, so
a program that reads `URL` carries none of the others."""

NAMESPACES_SCRIPT: Final = _script("namespaces.js")
"""A function expression `({namespaces, mcp, nsRequest, frozenCopy, resolved, rejected})`
returning the plugin namespaces and `MCP`; the setup fetches it (`call('source',
'namespaces')`) only in runs that have some."""

API_SCRIPT: Final = _script("api.js")
"""A function expression `({files, frozenCopy, resolved, rejected})` returning `{list, read}`
over the run's API files; `API.list`/`API.read` fetch it (`call('source', 'api')`) on first
use."""

SOURCES: Final = {
    "habits": HABITS_SCRIPT,
    "inspect": INSPECT_SCRIPT,
    # `call('source', 'web:URL')`: the script of the global's group.
    **{f"web:{name}": WEB_SCRIPTS[group] for name, group in WEB_GLOBALS.items()},
    "namespaces": NAMESPACES_SCRIPT,
    "api": API_SCRIPT,
}

HABIT_GLOBALS: Final = (
    "console",
    "setTimeout",
    "setInterval",
    "clearTimeout",
    "clearInterval",
    "sleep",
)
