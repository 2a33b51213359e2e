"""Crash points: named moments where a test can have the process killed (`kill -9`) on purpose.

State must survive a crash at the worst moment: between switching the session index to a
compaction's successor transcript and the next turn, between telling the model a code-mode run
is `waiting` and its `wait`, in the middle of a cron run. Such moments last microseconds, so a
test cannot hit them with a signal from outside; instead the code names them:

```python
crash_point("sessions.successor-switched")
```

and a process started with `NODMIX_CRASH_AT=sessions.successor-switched` sends itself
`SIGKILL` when it gets there: no `finally` runs, no buffer is flushed, exactly as if the machine
had lost the process. `NODMIX_CRASH_AT` holds one name or several separated by commas; a name
ending in `@N` fires the Nth time its point is reached (`codemode.result-recorded@2`).

The points: `sessions.successor-switched` (the index names a compaction's successor),
`codemode.park-saved`, `codemode.result-recorded`, `codemode.resume-taken`,
`codemode.resume-finished` (a suspended code-mode run) and `automation.fired-recorded` (a cron
run marked running).

Unset (as always outside tests) a point costs one environment lookup.
"""

from __future__ import annotations

import os
import signal
from typing import Final

ENV: Final = "NODMIX_CRASH_AT"

_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Kill the process here with SIGKILL if `NODMIX_CRASH_AT` names this point."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    count = _hits[name] = _hits.get(name, 0) + 1
    for item in spec.split(","):
        wanted, _, nth = item.strip().partition("@")
        if wanted == name and (not nth or (nth.isdigit() and int(nth) == count)):
            os.kill(os.getpid(), signal.SIGKILL)
