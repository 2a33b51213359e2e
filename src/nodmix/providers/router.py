"""`provider/model` references -> a `Provider` and the `ModelSpec` it serves.

The router knows the built-in presets merged with `models.providers` config, resolves API
keys from the environment when a provider is first used, and keeps one provider (one HTTP
connection pool) per provider id until `aclose()`. Adapter modules are imported only when a
provider of their API is built, so resolving `ollama/...` never imports the Anthropic code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import TracebackType
from typing import Protocol, Self

import msgspec

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import ModelsConfig, ModelTimeouts, RetryConfig
from nodmix.errors import ConfigError, ProviderAuthError
from nodmix.providers.base import ModelSpec, Provider
from nodmix.providers.debug import DebugSettings
from nodmix.providers.limits import CallLimits
from nodmix.providers.presets import (
    PRESET_KEY_ORDER,
    ProviderDefinition,
    merge_definition,
    preset_definitions,
)

_ENV_REF = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}$")


class ProviderFactory(Protocol):
    """Builds a provider for a definition (one per wire API; tests may register others)."""

    def __call__(
        self, definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
    ) -> Provider:
        """A provider for `definition`, using the resolved key and debug settings."""
        ...


def _openai_factory(
    definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
) -> Provider:
    from nodmix.providers.openai import OpenAIProvider

    return OpenAIProvider(
        name=definition.id,
        base_url=definition.base_url,
        api_key=api_key,
        headers=definition.headers,
        debug=debug,
        limits=call_limits(definition.timeouts),
    )


def _anthropic_factory(
    definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
) -> Provider:
    from nodmix.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        name=definition.id,
        base_url=definition.base_url,
        api_key=api_key,
        headers=definition.headers,
        debug=debug,
        limits=call_limits(definition.timeouts),
    )


DEFAULT_FACTORIES: Mapping[str, ProviderFactory] = {
    "openai-completions": _openai_factory,
    "anthropic-messages": _anthropic_factory,
}


def call_limits(timeouts: ModelTimeouts | None) -> CallLimits:
    """The connect and idle waits of a provider's `timeouts` setting (defaults when unset)."""
    defaults = CallLimits()
    if timeouts is None:
        return defaults
    return CallLimits(
        connect_seconds=timeouts.connect_seconds or defaults.connect_seconds,
        idle_seconds=timeouts.idle_seconds or defaults.idle_seconds,
    )


class ResolvedModel(msgspec.Struct, frozen=True):
    """A model reference resolved to the provider that serves it."""

    provider: Provider
    spec: ModelSpec
    retry: RetryConfig | None = None
    """The provider's `retry` setting."""


def split_ref(ref: str) -> tuple[str, str]:
    """`provider/model` -> `(provider, model)`; the model id may itself contain `/`.

    Raises:
        ConfigError: The reference has no provider or no model part.
    """
    provider_id, sep, model_id = ref.strip().partition("/")
    if not sep or not provider_id or not model_id:
        raise ConfigError(f"expected a model reference like 'openai/gpt-4.1', got {ref!r}")
    return provider_id, model_id


class ProviderRouter:
    """Resolves model references and owns the providers it builds.

    Args:
        models_config: The `models` section of `nodmix.json`.
        env: Environment for API keys and `OLLAMA_HOST` (pass `os.environ` in the CLI).
        debug: Traffic logging for the providers; read from `env` when `None`.
        factories: Provider builders by wire API, replacing or extending the built-ins.

    Raises:
        ConfigError: A custom provider in `models_config` lacks `api` or `baseUrl`.
    """

    def __init__(
        self,
        models_config: ModelsConfig,
        env: Mapping[str, str],
        *,
        debug: DebugSettings | None = None,
        factories: Mapping[str, ProviderFactory] | None = None,
    ) -> None:
        self._env = dict(env)
        self._debug = debug if debug is not None else DebugSettings.from_env(env)
        self._factories = {**DEFAULT_FACTORIES, **(factories or {})}
        presets = preset_definitions(env)
        self._definitions = dict(presets)
        for provider_id, config in models_config.providers.items():
            self._definitions[provider_id] = merge_definition(
                provider_id, config, presets.get(provider_id)
            )
        self._providers: dict[str, Provider] = {}

    @property
    def provider_ids(self) -> tuple[str, ...]:
        """Every known provider id, sorted."""
        return tuple(sorted(self._definitions))

    def definition(self, provider_id: str) -> ProviderDefinition:
        """The effective definition of a provider.

        Raises:
            ConfigError: No such provider.
        """
        try:
            return self._definitions[provider_id]
        except KeyError:
            known = ", ".join(self.provider_ids)
            raise ConfigError(
                f"unknown provider {provider_id!r} (known providers: {known}; define others"
                f" under models.providers)"
            ) from None

    def models(self) -> tuple[ModelSpec, ...]:
        """Every listed model of every provider (presets accept unlisted ids too)."""
        return tuple(m for pid in self.provider_ids for m in self._definitions[pid].models)

    def model_spec(self, ref: str) -> ModelSpec:
        """The spec of a model reference, without building its provider.

        Raises:
            ConfigError: Unknown provider, or a model a custom provider does not list.
        """
        provider_id, model_id = split_ref(ref)
        definition = self.definition(provider_id)
        spec = definition.model(model_id)
        if spec is not None:
            return spec
        if definition.models and not definition.preset:
            listed = ", ".join(m.id for m in definition.models)
            raise ConfigError(
                f"unknown model {model_id!r} for provider {provider_id!r} (its models: {listed})",
                key=f"models.providers.{provider_id}.models",
            )
        return ModelSpec(provider=provider_id, id=model_id)

    def resolve(self, ref: str) -> ResolvedModel:
        """The provider and spec for `provider/model`, building the provider on first use.

        Raises:
            ConfigError: Unknown provider or model, or a bad reference.
            ProviderAuthError: The provider needs an API key and none is configured.
        """
        spec = self.model_spec(ref)
        retry = self.definition(spec.provider).retry
        return ResolvedModel(provider=self.provider(spec.provider), spec=spec, retry=retry)

    def provider(self, provider_id: str) -> Provider:
        """The (cached) provider for an id.

        Raises:
            ConfigError: Unknown provider, or no adapter for its API.
            ProviderAuthError: The provider needs an API key and none is configured.
        """
        cached = self._providers.get(provider_id)
        if cached is not None:
            return cached
        definition = self.definition(provider_id)
        factory = self._factories.get(definition.api)
        if factory is None:
            raise ConfigError(
                f"no adapter for api {definition.api!r}", key=f"models.providers.{provider_id}.api"
            )
        provider = factory(definition, api_key=self._api_key(definition), debug=self._debug)
        self._providers[provider_id] = provider
        return provider

    def api_key(self, provider_id: str) -> str | None:
        """The provider's API key (for its other endpoints, such as audio).

        Raises:
            ConfigError: No such provider.
            ProviderAuthError: The provider needs a key and none is configured.
        """
        return self._api_key(self.definition(provider_id))

    def _api_key(self, definition: ProviderDefinition) -> str | None:
        key_path = f"models.providers.{definition.id}.apiKey"
        if definition.api_key:
            ref = _ENV_REF.match(definition.api_key.strip())
            if ref and not self._env.get(ref.group("name")):
                raise ProviderAuthError(
                    f"{definition.id}: no API key: {key_path} refers to ${{{ref.group('name')}}};"
                    f" set {ref.group('name')} in the environment",
                    provider=definition.id,
                )
            return resolve_secret(definition.api_key, key=key_path, env=self._env)
        if definition.api_key_env and self._env.get(definition.api_key_env):
            return self._env[definition.api_key_env]
        if definition.key_required:
            var = definition.api_key_env or "an environment variable"
            raise ProviderAuthError(
                f"{definition.id}: no API key: set {var} (or {key_path} in nodmix.json)",
                provider=definition.id,
            )
        return None

    async def aclose(self) -> None:
        """Close every provider built so far."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def default_model_ref(selection_primary: str | None, env: Mapping[str, str]) -> str:
    """The model to use when the user did not pick one on the command line.

    The configured primary wins; otherwise the first of OpenAI, Anthropic and OpenRouter
    whose API key is set in `env`; otherwise a local Ollama model (no key needed).
    """
    if selection_primary:
        return selection_primary
    presets = preset_definitions(env)
    for provider_id in PRESET_KEY_ORDER:
        preset = presets[provider_id]
        if preset.api_key_env and env.get(preset.api_key_env):
            return f"{provider_id}/{preset.default_model}"
    return f"ollama/{presets['ollama'].default_model}"
