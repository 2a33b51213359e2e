"""Model providers: the `Provider` seam, adapters per wire API, and the scripted test model.

- `base`: the `Provider` protocol, `ModelRequest`, the `ModelEvent` union, `collect()`.
- `openai`, `anthropic`: the chat-completions and Messages adapters (imported on demand).
- `router`: `provider/model` references -> providers, over built-in `presets`.
- `retry`: backoff for rate limits and outages before any output.
- `fake`: `FunctionProvider` / `ScriptedProvider`, deterministic models for tests.
- `overflow`, `errors`, `debug`: context-overflow detection, HTTP error mapping, traffic logs.

The adapters (and httpx2) are imported only when the router builds a provider of their API.
"""

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
from nodmix.providers.debug import DebugSettings
from nodmix.providers.fake import (
    FunctionProvider,
    ModelError,
    ModelReply,
    ReplyToolCall,
    ScriptedProvider,
)
from nodmix.providers.overflow import is_context_overflow
from nodmix.providers.retry import RetryPolicy, stream_with_retry
from nodmix.providers.router import ProviderRouter, ResolvedModel, default_model_ref

__all__ = [
    "DebugSettings",
    "FunctionProvider",
    "ModelError",
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
