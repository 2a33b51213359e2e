"""How often the email channel has answered each address lately, so that a robot which ignores
every auto-reply header (and so gets answered) cannot keep a mail loop going: past `limit`
replies within `window` seconds, mail from that address is left unanswered until the window
has moved on. Kept in memory and bounded; a restart forgets it (a loop then stops again
after `limit` more replies)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

KEPT_ADDRESSES = 2000


class ReplyLimit:
    """Recent replies per address (lower case)."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._sent: OrderedDict[str, deque[float]] = OrderedDict()

    def record(self, address: str) -> None:
        """One reply went to `address`."""
        key = address.strip().lower()
        stamps = self._recent(key)
        stamps.append(self._clock())
        self._sent[key] = stamps
        self._sent.move_to_end(key)
        while len(self._sent) > KEPT_ADDRESSES:
            self._sent.popitem(last=False)

    def exhausted(self, address: str) -> bool:
        """Whether `address` already got `limit` replies within the window."""
        return len(self._recent(address.strip().lower())) >= self.limit

    def _recent(self, key: str) -> deque[float]:
        stamps = self._sent.get(key) or deque(maxlen=self.limit)
        cutoff = self._clock() - self.window
        while stamps and stamps[0] <= cutoff:
            stamps.popleft()
        return stamps
