"""The built-in `legacy` context engine.

Ingest is a no-op (the session transcript is the store), assembly passes the replayed history
through, and compaction is delegated to Nodmix's built-in summarising compactor, which the runtime
hands in as the `compact_with_runtime` service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nodmix.context.base import (
    AssembleParams,
    AssembleResult,
    CompactParams,
    CompactResult,
    ContextEngineInfo,
    EngineContext,
    IngestParams,
)
from nodmix.context.sdk import COMPACT_SERVICE
from nodmix.context.tokens import estimate_tokens

LEGACY_ENGINE_ID = "legacy"

RuntimeCompactor = Callable[[CompactParams], Awaitable[CompactResult]]


class LegacyContextEngine:
    """Pass-through assembly plus the built-in compaction."""

    info = ContextEngineInfo(id=LEGACY_ENGINE_ID, name="Legacy", version="1", owns_compaction=False)

    def __init__(self, compactor: RuntimeCompactor | None = None) -> None:
        self._compactor = compactor

    async def ingest(self, params: IngestParams) -> None:
        """Nothing to do: the transcript already holds the message."""

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """The replayed history as is."""
        return AssembleResult(
            messages=params.messages, estimated_tokens=estimate_tokens(params.messages)
        )

    async def compact(self, params: CompactParams) -> CompactResult:
        """Run the built-in compaction."""
        if self._compactor is None:
            return CompactResult(ok=False, compacted=False, reason="no compactor is available")
        return await self._compactor(params)


def legacy_factory(ctx: EngineContext) -> LegacyContextEngine:
    """Registry factory for the legacy engine."""
    compactor = ctx.services.get(COMPACT_SERVICE)
    return LegacyContextEngine(compactor)
