"""Calling an engine's optional per-session member `bootstrap` exactly once per session."""

from __future__ import annotations

from typing import Protocol

from nodmix.context.base import BootstrapParams, ContextEngine
from nodmix.messages import Message


class SessionView(Protocol):
    """What bootstrapping needs from a session."""

    @property
    def key(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    def messages_for_model(self) -> list[Message]: ...


class Bootstrapper:
    """Remembers which (engine, session) pairs were bootstrapped in this process.

    A successor transcript (after compaction) is a new session id, so the engine sees it anew,
    which is what an engine that indexes a transcript's history needs.
    """

    def __init__(self) -> None:
        self._done: set[tuple[str, str]] = set()

    async def bootstrap(self, engine: ContextEngine, session: SessionView) -> None:
        """Call `engine.bootstrap(...)` the first time the engine meets `session`."""
        bootstrap = getattr(engine, "bootstrap", None)
        key = (engine.info.id, session.session_id)
        if bootstrap is None or key in self._done:
            return
        await bootstrap(
            BootstrapParams(
                session_id=session.session_id,
                session_key=session.key,
                messages=session.messages_for_model(),
            )
        )
        self._done.add(key)
