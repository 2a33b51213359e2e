"""Built-in providers, and merging `models.providers` config over them.

A `models.providers.<id>` entry whose id is a preset (`openai`, `anthropic`, `openrouter`,
`ollama`) only overrides what it sets: `baseUrl`, `apiKey`, `headers` (merged), and `models`
(merged by model id, field by field). Any other id defines a custom provider, which must say
which wire `api` it speaks and where (`baseUrl`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

import msgspec

from nodmix.config.schema import ModelEntry, ModelTimeouts, ProviderConfig, RetryConfig
from nodmix.errors import ConfigError
from nodmix.providers.base import ModelSpec, ProviderAPI


class ProviderDefinition(msgspec.Struct, frozen=True, kw_only=True):
    """Everything needed to build one provider: built-in defaults merged with config."""

    id: str
    api: ProviderAPI
    base_url: str
    api_key: str | None = None
    """From config: a literal key or `${ENV_VAR}`; wins over `api_key_env`."""
    api_key_env: str | None = None
    """The environment variable a preset reads its key from."""
    key_required: bool = True
    """Whether requests are pointless without a key (false for local servers)."""
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    models: tuple[ModelSpec, ...] = ()
    preset: bool = False
    """Built in: any model id is accepted, with default limits when not listed."""
    default_model: str | None = None
    """The model `default_model_ref` picks for this provider."""
    timeouts: ModelTimeouts | None = None
    """`timeouts` from config (connect and idle seconds); defaults when unset."""
    retry: RetryConfig | None = None
    """`retry` from config (attempts and the longest wait); defaults when unset."""

    def model(self, model_id: str) -> ModelSpec | None:
        """The listed model with this id, if any."""
        return next((m for m in self.models if m.id == model_id), None)


_VISION = ("text", "image")


def _models(
    provider: str, *entries: tuple[str, int, int] | tuple[str, int, int, bool]
) -> tuple[ModelSpec, ...]:
    """Listed models: `(id, context window, max tokens[, sees images])`."""
    return tuple(
        ModelSpec(
            provider=provider,
            id=entry[0],
            context_window=entry[1],
            max_tokens=entry[2],
            input=_VISION if len(entry) > 3 and entry[3] else ("text",),
        )
        for entry in entries
    )


def ollama_base_url(env: Mapping[str, str]) -> str:
    """The Ollama OpenAI-compatible endpoint, honouring `OLLAMA_HOST`.

    `OLLAMA_HOST` may be `host`, `host:port` or a URL; a `0.0.0.0` bind address means this
    machine.
    """
    host = env.get("OLLAMA_HOST", "").strip().rstrip("/")
    if not host:
        return "http://127.0.0.1:11434/v1"
    scheme, sep, rest = host.partition("://")
    if not sep:
        scheme, rest = "http", host
    hostport, _, path = rest.partition("/")
    # An IPv6 literal (`[::1]`) has colons of its own; only `]:` marks a port there.
    has_port = "]:" in hostport if hostport.startswith("[") else ":" in hostport
    if not has_port:
        hostport += ":11434"
    hostport = hostport.replace("0.0.0.0", "127.0.0.1", 1)
    base = f"{scheme}://{hostport}" + (f"/{path}" if path else "")
    return base if base.endswith("/v1") else f"{base}/v1"


def preset_definitions(env: Mapping[str, str]) -> dict[str, ProviderDefinition]:
    """The built-in providers (Ollama's address depends on `OLLAMA_HOST`)."""
    return {
        "openai": ProviderDefinition(
            id="openai",
            api="openai-completions",
            base_url="https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            preset=True,
            default_model="gpt-4.1",
            models=_models(
                "openai",
                ("gpt-4.1", 1_047_576, 32_768, True),
                ("gpt-4.1-mini", 1_047_576, 32_768, True),
                ("gpt-4o", 128_000, 16_384, True),
                ("gpt-4o-mini", 128_000, 16_384, True),
                ("o4-mini", 200_000, 100_000, True),
                ("gpt-5", 400_000, 128_000, True),
                ("gpt-5-mini", 400_000, 128_000, True),
            ),
        ),
        "anthropic": ProviderDefinition(
            id="anthropic",
            api="anthropic-messages",
            base_url="https://api.anthropic.com",
            api_key_env="ANTHROPIC_API_KEY",
            preset=True,
            default_model="claude-sonnet-4-5",
            models=_models(
                "anthropic",
                ("claude-sonnet-4-5", 200_000, 64_000, True),
                ("claude-opus-4-1", 200_000, 32_000, True),
                ("claude-sonnet-4-0", 200_000, 64_000, True),
                ("claude-haiku-4-5", 200_000, 64_000, True),
                ("claude-3-5-haiku-latest", 200_000, 8_192),
            ),
        ),
        "openrouter": ProviderDefinition(
            id="openrouter",
            api="openai-completions",
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            preset=True,
            default_model="anthropic/claude-sonnet-4",
            models=_models(
                "openrouter",
                ("anthropic/claude-sonnet-4", 200_000, 64_000, True),
                ("openai/gpt-4o", 128_000, 16_384, True),
                ("google/gemini-2.5-pro", 1_048_576, 65_536, True),
                ("meta-llama/llama-3.3-70b-instruct", 131_072, 8_192),
            ),
        ),
        "ollama": ProviderDefinition(
            id="ollama",
            api="openai-completions",
            base_url=ollama_base_url(env),
            api_key_env="OLLAMA_API_KEY",
            key_required=False,
            preset=True,
            default_model="llama3.2",
            models=_models(
                "ollama",
                ("llama3.2", 131_072, 8_192),
                ("llama3.1", 131_072, 8_192),
                ("qwen2.5", 32_768, 8_192),
                ("qwen3", 40_960, 8_192),
                ("gpt-oss:20b", 131_072, 32_768),
                ("llama3.2-vision", 131_072, 8_192, True),
                ("qwen2.5vl", 125_000, 8_192, True),
                ("gemma3", 131_072, 8_192, True),
            ),
        ),
    }


PRESET_KEY_ORDER = ("openai", "anthropic", "openrouter")
"""Which preset `default_model_ref` picks when several keys are set."""


def merge_definition(
    provider_id: str, config: ProviderConfig | None, preset: ProviderDefinition | None
) -> ProviderDefinition:
    """The effective definition of `provider_id`: `config` over `preset`.

    Raises:
        ConfigError: A custom provider (no preset) lacks `api` or `baseUrl`.
    """
    key = f"models.providers.{provider_id}"
    if preset is None:
        if config is None or config.api is None:
            apis = ", ".join(get_args(ProviderAPI))
            raise ConfigError(f"a custom provider needs 'api' (one of: {apis})", key=f"{key}.api")
        if not config.base_url:
            raise ConfigError(
                "a custom provider needs 'baseUrl' (the API root)", key=f"{key}.baseUrl"
            )
        preset = ProviderDefinition(
            id=provider_id, api=config.api, base_url=config.base_url, key_required=False
        )
    if config is None:
        return preset
    return msgspec.structs.replace(
        preset,
        api=config.api or preset.api,
        base_url=config.base_url or preset.base_url,
        api_key=config.api_key if config.api_key is not None else preset.api_key,
        headers={**preset.headers, **config.headers},
        models=_merge_models(provider_id, preset.models, config.models),
        timeouts=config.timeouts or preset.timeouts,
        retry=config.retry or preset.retry,
    )


def _merge_models(
    provider_id: str, base: tuple[ModelSpec, ...], entries: list[ModelEntry]
) -> tuple[ModelSpec, ...]:
    merged = {m.id: m for m in base}
    for entry in entries:
        current = merged.get(entry.id) or ModelSpec(provider=provider_id, id=entry.id)
        merged[entry.id] = msgspec.structs.replace(
            current,
            name=entry.name if entry.name is not None else current.name,
            context_window=entry.context_window or current.context_window,
            max_tokens=entry.max_tokens or current.max_tokens,
            input=tuple(dict.fromkeys(["text", *entry.input])) if entry.input else current.input,
        )
    return tuple(merged.values())
