"""Compaction: condensing long conversations so they keep fitting the model's context window.

The pipeline (`plan` → `summarize` → `compactor`), its settings, and the runtime pieces around
it (`service`, `guard`, `memory_flush`). Only the seam types are imported here, so plugins can
use them without pulling in the agent loop.
"""

from nodmix.compaction.base import (
    CompactionProvider,
    ProviderRequest,
    Summarizer,
    SummaryRequest,
)

__all__ = ["CompactionProvider", "ProviderRequest", "Summarizer", "SummaryRequest"]
