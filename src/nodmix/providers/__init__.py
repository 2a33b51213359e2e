"""Model providers: the `Provider` seam, adapters per wire API, and the scripted test model."""

from nodmix.providers.base import (
    ModelEvent,
    ModelRequest,
    ModelSpec,
    Provider,
    ProviderAPI,
    ResponseBuilder,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
    collect,
)

__all__ = [
    "ModelEvent",
    "ModelRequest",
    "ModelSpec",
    "Provider",
    "ProviderAPI",
    "ResponseBuilder",
    "ResponseDone",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallEvent",
    "UsageEvent",
    "collect",
]
