"""Model providers: the `Provider` seam, adapters per wire API, and the scripted test model.

- `base`: the `Provider` protocol, `ModelRequest`, the `ModelEvent` union, `collect()`.
- `openai`, `anthropic`: the chat-completions and Messages adapters (imported on demand).
- `router`: `provider/model` references -> providers, over built-in `presets`.
- `retry`: backoff for rate limits and outages before any output.
- `fake`: `FunctionProvider` / `ScriptedProvider`, deterministic models for tests.
- `overflow`, `errors`, `debug`: context-overflow detection, HTTP error mapping, traffic logs.

The adapters (and httpx2) are imported only when the router builds a provider of their API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from nodmix.providers.debug import DebugSettings
    from nodmix.providers.fake import (
        FunctionProvider,
        ModelError,
        ModelReply,
        ModelStall,
        ReplyToolCall,
        ScriptedProvider,
    )
    from nodmix.providers.overflow import is_context_overflow
    from nodmix.providers.retry import RetryPolicy, stream_with_retry
    from nodmix.providers.router import ProviderRouter, ResolvedModel, default_model_ref

# Loaded on first access: the scripted model and the router are not needed to import the seam.
_LAZY = {
    "DebugSettings": "nodmix.providers.debug",
    "FunctionProvider": "nodmix.providers.fake",
    "ModelError": "nodmix.providers.fake",
    "ModelStall": "nodmix.providers.fake",
    "ModelReply": "nodmix.providers.fake",
    "ReplyToolCall": "nodmix.providers.fake",
    "ScriptedProvider": "nodmix.providers.fake",
    "is_context_overflow": "nodmix.providers.overflow",
    "RetryPolicy": "nodmix.providers.retry",
    "stream_with_retry": "nodmix.providers.retry",
    "ProviderRouter": "nodmix.providers.router",
    "ResolvedModel": "nodmix.providers.router",
    "default_model_ref": "nodmix.providers.router",
}

__all__ = [
    "DebugSettings",
    "FunctionProvider",
    "ModelError",
    "ModelStall",
    "ModelEvent",
    "ModelReply",
    "ModelRequest",
    "ModelSpec",
    "Provider",
    "ProviderAPI",
    "ProviderRouter",
    "ReplyToolCall",
    "ResolvedModel",
    "ResponseBuilder",
    "ResponseDone",
    "RetryPolicy",
    "ScriptedProvider",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallEvent",
    "UsageEvent",
    "collect",
    "default_model_ref",
    "is_context_overflow",
    "stream_with_retry",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
