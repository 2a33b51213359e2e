"""Model references -> providers: presets, config merging, custom providers, keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from nodmix.config.schema import ModelsConfig
from nodmix.errors import ConfigError, ProviderAuthError
from nodmix.providers.anthropic import AnthropicProvider
from nodmix.providers.base import ModelSpec
from nodmix.providers.debug import DebugSettings
from nodmix.providers.fake import FunctionProvider, ModelReply
from nodmix.providers.openai import OpenAIProvider
from nodmix.providers.presets import ProviderDefinition, ollama_base_url
from nodmix.providers.router import ProviderRouter, default_model_ref, split_ref

pytestmark = pytest.mark.anyio


def models(raw: Mapping[str, Any]) -> ModelsConfig:
    return msgspec.convert({"providers": raw}, ModelsConfig)


async def test_preset_resolves_with_its_known_limits_and_env_key() -> None:
    async with ProviderRouter(ModelsConfig(), {"OPENAI_API_KEY": "sk-live"}) as router:
        resolved = router.resolve("openai/gpt-4o")
        assert isinstance(resolved.provider, OpenAIProvider)
        assert resolved.provider.name == "openai"
        assert resolved.provider.base_url == "https://api.openai.com/v1"
        assert resolved.spec == ModelSpec(
            provider="openai",
            id="gpt-4o",
            context_window=128_000,
            max_tokens=16_384,
            input=("text", "image"),
        )


async def test_presets_accept_unlisted_models_with_default_limits() -> None:
    async with ProviderRouter(ModelsConfig(), {"ANTHROPIC_API_KEY": "k"}) as router:
        resolved = router.resolve("anthropic/claude-next-9")
    assert isinstance(resolved.provider, AnthropicProvider)
    assert resolved.spec == ModelSpec(provider="anthropic", id="claude-next-9")


async def test_model_ids_may_contain_slashes() -> None:
    async with ProviderRouter(ModelsConfig(), {"OPENROUTER_API_KEY": "k"}) as router:
        resolved = router.resolve("openrouter/anthropic/claude-sonnet-4")
    assert resolved.provider.name == "openrouter"
    assert resolved.spec.id == "anthropic/claude-sonnet-4"
    assert resolved.spec.context_window == 200_000


async def test_one_provider_is_built_per_provider_id_and_closed_with_the_router() -> None:
    built: list[FunctionProvider] = []

    def factory(
        definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
    ) -> FunctionProvider:
        provider = FunctionProvider(lambda request: ModelReply.text("x"), name=definition.id)
        built.append(provider)
        return provider

    router = ProviderRouter(
        ModelsConfig(), {"OPENAI_API_KEY": "k"}, factories={"openai-completions": factory}
    )
    first = router.resolve("openai/gpt-4o").provider
    second = router.resolve("openai/gpt-4.1").provider
    assert first is second
    assert len(built) == 1
    await router.aclose()
    assert built[0].closed


def test_unknown_provider_lists_the_known_ids() -> None:
    router = ProviderRouter(
        models({"local": {"api": "openai-completions", "baseUrl": "http://x"}}), {}
    )
    with pytest.raises(ConfigError) as info:
        router.resolve("nope/model")
    assert "unknown provider 'nope'" in str(info.value)
    assert "anthropic, local, ollama, openai, openrouter" in str(info.value)


@pytest.mark.parametrize("ref", ["gpt-4o", "openai/", "/gpt-4o", ""])
def test_malformed_references_are_config_errors(ref: str) -> None:
    with pytest.raises(ConfigError, match="provider/model|like 'openai/gpt-4.1'"):
        split_ref(ref)


def test_missing_preset_key_names_the_env_var_to_set() -> None:
    router = ProviderRouter(ModelsConfig(), {})
    with pytest.raises(ProviderAuthError) as info:
        router.resolve("anthropic/claude-sonnet-4-5")
    assert str(info.value) == (
        "anthropic: no API key: set ANTHROPIC_API_KEY (or models.providers.anthropic.apiKey in"
        " nodmix.json)"
    )


def test_config_key_reference_to_an_unset_variable_names_it() -> None:
    router = ProviderRouter(models({"openai": {"apiKey": "${MY_OPENAI_KEY}"}}), {})
    with pytest.raises(ProviderAuthError, match=r"set MY_OPENAI_KEY in the environment"):
        router.resolve("openai/gpt-4o")


async def test_config_key_reference_is_resolved_from_the_environment() -> None:
    seen: list[str | None] = []

    def factory(
        definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
    ) -> FunctionProvider:
        seen.append(api_key)
        return FunctionProvider(lambda request: ModelReply.text("x"))

    raw = {
        "openai": {"apiKey": "${MY_OPENAI_KEY}"},
        "lit": {"api": "openai-completions", "baseUrl": "http://h/v1", "apiKey": "literal-key"},
    }
    router = ProviderRouter(
        models(raw), {"MY_OPENAI_KEY": "from-env"}, factories={"openai-completions": factory}
    )
    router.resolve("openai/gpt-4o")
    router.resolve("lit/m")
    assert seen == ["from-env", "literal-key"]


async def test_ollama_needs_no_key_and_honours_ollama_host() -> None:
    async with ProviderRouter(ModelsConfig(), {"OLLAMA_HOST": "0.0.0.0:9999"}) as router:
        resolved = router.resolve("ollama/llama3.2")
    assert isinstance(resolved.provider, OpenAIProvider)
    assert resolved.provider.base_url == "http://127.0.0.1:9999/v1"
    assert resolved.spec.context_window == 131_072


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("", "http://127.0.0.1:11434/v1"),
        ("gpu-box", "http://gpu-box:11434/v1"),
        ("gpu-box:8080", "http://gpu-box:8080/v1"),
        ("https://ollama.example.com", "https://ollama.example.com:11434/v1"),
        ("http://10.0.0.5:11434/", "http://10.0.0.5:11434/v1"),
        ("[::1]", "http://[::1]:11434/v1"),
        ("http://host:1/v1", "http://host:1/v1"),
    ],
)
def test_ollama_host_forms_are_normalised(host: str, url: str) -> None:
    assert ollama_base_url({"OLLAMA_HOST": host}) == url


async def test_preset_config_merges_only_the_fields_it_sets() -> None:
    raw = {
        "openai": {
            "baseUrl": "http://proxy.local/v1",
            "headers": {"X-Team": "a"},
            "models": [
                {"id": "gpt-4o", "contextWindow": 64000},
                {"id": "my-tune", "maxTokens": 99},
            ],
        }
    }
    async with ProviderRouter(models(raw), {"OPENAI_API_KEY": "k"}) as router:
        definition = router.definition("openai")
        assert definition.base_url == "http://proxy.local/v1"
        assert definition.api == "openai-completions"
        assert definition.headers == {"X-Team": "a"}
        assert router.resolve("openai/gpt-4o").spec == ModelSpec(
            provider="openai",
            id="gpt-4o",
            context_window=64_000,
            max_tokens=16_384,
            input=("text", "image"),  # kept from the preset: the entry did not set it
        )
        assert router.resolve("openai/my-tune").spec.max_tokens == 99
        assert router.resolve("openai/gpt-4.1").spec.context_window == 1_047_576


async def test_custom_provider_serves_only_its_listed_models() -> None:
    raw = {
        "vllm": {
            "api": "openai-completions",
            "baseUrl": "http://gpu:8000/v1",
            "models": [{"id": "qwen", "contextWindow": 32768}, {"id": "llama"}],
        }
    }
    async with ProviderRouter(models(raw), {}) as router:
        resolved = router.resolve("vllm/qwen")
        assert resolved.spec.context_window == 32_768
        with pytest.raises(ConfigError) as info:
            router.resolve("vllm/mistral")
    assert str(info.value) == (
        "models.providers.vllm.models: unknown model 'mistral' for provider 'vllm'"
        " (its models: qwen, llama)"
    )


async def test_custom_provider_without_models_accepts_any_id() -> None:
    raw = {"lm": {"api": "anthropic-messages", "baseUrl": "http://lm:1234"}}
    async with ProviderRouter(models(raw), {}) as router:
        resolved = router.resolve("lm/whatever")
    assert isinstance(resolved.provider, AnthropicProvider)
    assert resolved.provider.url == "http://lm:1234/v1/messages"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"baseUrl": "http://x"}, "models.providers.mine.api"),
        ({"api": "openai-completions"}, "models.providers.mine.baseUrl"),
    ],
)
def test_custom_provider_needs_api_and_base_url(raw: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRouter(models({"mine": raw}), {})
    assert info.value.key == key


def test_model_listing_covers_presets_and_custom_models() -> None:
    raw = {"lm": {"api": "openai-completions", "baseUrl": "http://lm", "models": [{"id": "a"}]}}
    refs = {m.ref for m in ProviderRouter(models(raw), {}).models()}
    assert {"lm/a", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5", "ollama/llama3.2"} <= refs


@pytest.mark.parametrize(
    ("primary", "env", "ref"),
    [
        ("anthropic/claude-opus-4-1", {"OPENAI_API_KEY": "k"}, "anthropic/claude-opus-4-1"),
        (None, {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "openai/gpt-4.1"),
        (None, {"ANTHROPIC_API_KEY": "k"}, "anthropic/claude-sonnet-4-5"),
        (None, {"OPENROUTER_API_KEY": "k"}, "openrouter/anthropic/claude-sonnet-4"),
        (None, {"OPENAI_API_KEY": ""}, "ollama/llama3.2"),
        (None, {}, "ollama/llama3.2"),
    ],
)
def test_default_model_ref_prefers_config_then_keys_then_ollama(
    primary: str | None, env: dict[str, str], ref: str
) -> None:
    assert default_model_ref(primary, env) == ref


def test_router_passes_debug_settings_from_env_to_providers() -> None:
    seen: list[DebugSettings] = []

    def factory(
        definition: ProviderDefinition, *, api_key: str | None, debug: DebugSettings
    ) -> FunctionProvider:
        seen.append(debug)
        return FunctionProvider(lambda request: ModelReply.text("x"))

    env = {"OPENAI_API_KEY": "k", "NODMIX_DEBUG_MODEL_PAYLOAD": "tools"}
    ProviderRouter(ModelsConfig(), env, factories={"openai-completions": factory}).resolve(
        "openai/gpt-4o"
    )
    assert seen == [DebugSettings(payload="tools")]
