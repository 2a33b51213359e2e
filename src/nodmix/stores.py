"""Which state backend serves a state directory in this process: the seam every store opens
through.

Each stateful domain has a small `open_*` function next to its file store (for example
`channels.delivery.open_delivery_log`). It asks `provided(state_dir, "<domain>", ...)` first:
a backend bound to that state directory (the composition root binds PostgreSQL when
`state.backend` says so) returns its own store for the domain, and `None` means "files", the
store the domain has always had. This module imports nothing of Nodmix, so any package may use
it without an import circle, and the files backend costs one dict lookup per store opened
(stores are opened once per process, never per turn).

CLI commands run outside a `Runtime`; the first `provided()` for an unbound state directory
asks the resolver the CLI installs (`set_resolver`), which reads the config and binds the
configured backend (or nothing, for files).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class Provider(Protocol):
    """A state backend as the domains see it."""

    kind: str
    """`postgres` (the files backend is the absence of a provider)."""

    def provide(self, domain: str, *args: Any) -> Any:
        """The backend's store for `domain` (built with `args`), or None to use files."""
        ...


_lock = threading.Lock()
_bound: dict[Path, Provider] = {}
_resolved: set[Path] = set()
_resolver: Callable[[Path], Provider | None] | None = None


def _key(state_dir: Path) -> Path:
    return Path(state_dir).absolute()


def bind(state_dir: Path, provider: Provider) -> None:
    """Serve `state_dir` from `provider` in this process (until `unbind`)."""
    with _lock:
        _bound[_key(state_dir)] = provider
        _resolved.add(_key(state_dir))


def unbind(state_dir: Path, provider: Provider | None = None) -> None:
    """Stop serving `state_dir` from a backend (only from `provider`, when given)."""
    with _lock:
        key = _key(state_dir)
        if provider is None or _bound.get(key) is provider:
            _bound.pop(key, None)
            _resolved.discard(key)


def set_resolver(resolver: Callable[[Path], Provider | None] | None) -> None:
    """How an unbound state directory finds its backend (the CLI reads the config)."""
    global _resolver
    with _lock:
        _resolver = resolver
        _resolved.clear()
        _resolved.update(_bound)


def bound(state_dir: Path) -> Provider | None:
    """The backend serving `state_dir` (resolving it on first use), or None for files."""
    key = _key(state_dir)
    provider = _bound.get(key)
    if provider is not None or key in _resolved:
        return provider
    with _lock:
        resolver = _resolver
        _resolved.add(key)
    if resolver is None:
        return None
    found = resolver(key)
    if found is not None:
        bind(key, found)
    return found


def provided(state_dir: Path, domain: str, *args: Any) -> Any:
    """The bound backend's store for `domain`, or None (use the file store)."""
    provider = bound(state_dir)
    if provider is None:
        return None
    return provider.provide(domain, *args)
