"""The `builtin` memory backend: Nodmix's own index (`MemoryService`), and holding plugin
backends to the `MemoryBackend` contract."""

from __future__ import annotations

from typing import Any

from nodmix.errors import PluginError
from nodmix.memory.base import (
    BUILTIN_MEMORY_ID,
    MemoryBackend,
    MemoryContext,
    MemoryFactory,
    MemoryInfo,
    MemoryRead,
    MemorySearch,
    MemorySearchResult,
    MemoryText,
)
from nodmix.memory.service import MemoryService

BUILTIN_INFO = MemoryInfo(id=BUILTIN_MEMORY_ID, name="Nodmix memory index")


class BuiltinMemory:
    """One agent's memory through the runtime's `MemoryService`."""

    info = BUILTIN_INFO

    def __init__(self, service: MemoryService, agent_id: str) -> None:
        self._service = service
        self._agent_id = agent_id

    async def search(self, params: MemorySearch) -> MemorySearchResult:
        hits, index = await self._service.search(
            self._agent_id, params.query, max_results=params.max_results, min_score=params.min_score
        )
        error = index.embedding_error
        return MemorySearchResult(
            hits=hits,
            mode=index.settings.mode if error is None else "keyword",
            warning=None if error is None else f"vector search unavailable: {error}",
        )

    async def read(self, params: MemoryRead) -> MemoryText:
        text, first, last = await self._service.read(
            self._agent_id, params.path, params.start, params.lines
        )
        return MemoryText(text=text, first=first, last=last)


def builtin_memory(service: MemoryService) -> MemoryFactory:
    """The factory of the `builtin` backend over `service`."""

    def create(ctx: MemoryContext) -> MemoryBackend:
        return BuiltinMemory(service, ctx.agent_id)

    return create


class CheckedMemory:
    """A plugin's backend whose crashes and wrong answers become one `PluginError` naming the
    backend, the plugin and the fix (a missing document stays `FileNotFoundError`)."""

    def __init__(self, backend: Any, memory_id: str, owner: str) -> None:
        self._backend = backend
        self._where = f"memory backend {memory_id!r} from plugin {owner!r}"
        self._fix = (
            f"fix or update the plugin, or set plugins.slots.memory back to '{BUILTIN_MEMORY_ID}'"
        )
        info = getattr(backend, "info", None)
        self.info = info if isinstance(info, MemoryInfo) else MemoryInfo(id=memory_id, name=owner)

    async def search(self, params: MemorySearch) -> MemorySearchResult:
        try:
            result = await self._backend.search(params)
        except Exception as exc:
            raise self._failed("search", exc) from None
        if not isinstance(result, MemorySearchResult):
            raise self._wrong("search", "MemorySearchResult", result)
        return result

    async def read(self, params: MemoryRead) -> MemoryText:
        try:
            result = await self._backend.read(params)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise self._failed("read", exc) from None
        if not isinstance(result, MemoryText):
            raise self._wrong("read", "MemoryText", result)
        return result

    def _failed(self, member: str, exc: Exception) -> PluginError:
        return PluginError(f"{self._where}: {member}() failed: {type(exc).__name__}: {exc}")

    def _wrong(self, member: str, expected: str, got: object) -> PluginError:
        return PluginError(
            f"{self._where}: {member}() returned {type(got).__name__}, not {expected}; {self._fix}"
        )


def check_memory_shape(backend: object, memory_id: str, owner: str) -> None:
    """Raise `PluginError` unless `backend` has async-callable `search` and `read`."""
    for member in ("search", "read"):
        if not callable(getattr(backend, member, None)):
            raise PluginError(
                f"memory backend {memory_id!r} from plugin {owner!r} has no {member}() method; "
                f"set plugins.slots.memory back to '{BUILTIN_MEMORY_ID}' or fix the plugin"
            )
