"""Context management: the context-engine seam, the built-in `legacy` engine, token estimates.

Engine authors need `nodmix.context.base` (the protocol and its parameter types) and
`nodmix.context.sdk` (`delegate_compaction_to_runtime`, `build_memory_system_prompt_addition`).
The rest serves the runtime: `guard` (the loop's seam to compaction), `pruning`, `overflow`,
`checked` (contract checks around plugin engines) and `status` (for `nodmix doctor`).
"""

from nodmix.context.base import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    CompactParams,
    CompactResult,
    ContextEngine,
    ContextEngineFactory,
    ContextEngineInfo,
    EngineContext,
    IngestBatchParams,
    IngestParams,
    SubagentEndedParams,
    SubagentSpawnParams,
)
from nodmix.context.sdk import build_memory_system_prompt_addition, delegate_compaction_to_runtime

__all__ = [
    "AfterTurnParams",
    "AssembleParams",
    "AssembleResult",
    "BootstrapParams",
    "CompactParams",
    "CompactResult",
    "ContextEngine",
    "ContextEngineFactory",
    "ContextEngineInfo",
    "EngineContext",
    "IngestBatchParams",
    "IngestParams",
    "SubagentEndedParams",
    "SubagentSpawnParams",
    "build_memory_system_prompt_addition",
    "delegate_compaction_to_runtime",
]
