"""Values a turn derives from the live config, computed once per config instead of per turn.

An agent's resolved profile, its core tools and its skills' prompt section depend only on the
config (and, for the last two, on the skills a scan found); the runtime keeps them here. A
config reload replaces the config object, and the first lookup after that starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar, cast

from nodmix.config.schema import NodmixConfig

T = TypeVar("T")

MAX_ENTRIES = 256
"""Entries kept per config; past this the cache starts over (many agents or skill sets)."""


class ConfigCache:
    """Derived values keyed by what they are derived from, valid for one config object."""

    def __init__(self, config: Callable[[], NodmixConfig]) -> None:
        self._config = config
        self._seen: NodmixConfig | None = None
        self._values: dict[Hashable, object] = {}

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value for `key` under the current config, built on first use."""
        current = self._config()
        if current is not self._seen:
            self._values.clear()
            self._seen = current
        if key in self._values:
            return cast(T, self._values[key])
        value = build()
        if len(self._values) >= MAX_ENTRIES:
            self._values.clear()
        self._values[key] = value
        return value
