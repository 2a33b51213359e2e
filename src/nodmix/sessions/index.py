"""`SessionIndex`: one agent's session index as the rest of the sessions package uses it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from nodmix.sessions.store_entry import SessionEntry, StoreData

T = TypeVar("T")


class SessionIndex(Protocol):
    """One agent's session index: session key -> `SessionEntry` (`SessionStore` on files)."""

    @property
    def path(self) -> Path:
        """Where the index lives (a file, or the name it has in a database)."""
        ...

    def load(self) -> StoreData:
        """Every entry (a fresh dict)."""
        ...

    def get(self, session_key: str) -> SessionEntry | None:
        """One entry, if any."""
        ...

    def update(self, change: Callable[[StoreData], T], *, sync: bool = True) -> T:
        """Apply `change` to the current entries under the index's lock and save what it
        changed; `sync=False` may skip making the change durable at once."""
        ...

    def update_entry(
        self, session_key: str, change: Callable[[SessionEntry], SessionEntry]
    ) -> SessionEntry | None:
        """Replace one entry with `change(entry)`; None if the key has none."""
        ...

    def compact(self) -> bool:
        """Fold pending changes into the compact form (at shutdown); False if none."""
        ...
