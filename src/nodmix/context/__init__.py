"""Context management: the context-engine seam, the built-in `legacy` engine, token estimates."""

from nodmix.context.base import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    CompactParams,
    CompactResult,
    ContextEngine,
    ContextEngineFactory,
    ContextEngineInfo,
    EngineContext,
    IngestParams,
)

__all__ = [
    "AfterTurnParams",
    "AssembleParams",
    "AssembleResult",
    "CompactParams",
    "CompactResult",
    "ContextEngine",
    "ContextEngineFactory",
    "ContextEngineInfo",
    "EngineContext",
    "IngestParams",
]
