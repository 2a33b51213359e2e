"""The onboarding wizard's decisions, without the terminal: choices in, `nodmix.json` out.

`nodmix onboard` asks (or takes as flags) a provider, its key or local server URL, a model from
the server's `/models`, whether code mode is on, and then writes the config through the same
validating, atomic writer as `nodmix config set`. Existing settings the wizard does not ask
about are kept.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodmix.config.schema import ModelsConfig, ProviderConfig
from nodmix.providers.router import ProviderRouter


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """One provider the wizard offers."""

    id: str
    label: str
    key_env: str | None
    """The environment variable its key usually lives in (`None`: a local server)."""
    default_url: str | None = None


PROVIDERS = (
    ProviderChoice("openai", "OpenAI", "OPENAI_API_KEY"),
    ProviderChoice("anthropic", "Anthropic", "ANTHROPIC_API_KEY"),
    ProviderChoice("openrouter", "OpenRouter", "OPENROUTER_API_KEY"),
    ProviderChoice(
        "local",
        "a local OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio, ...)",
        None,
        "http://127.0.0.1:11434/v1",
    ),
)
LOCAL_PROVIDER = "local"
CHANNELS = {"telegram": "TELEGRAM_BOT_TOKEN"}
"""Channels the wizard can add → the variable their token is read from."""


def channels_supported() -> bool:
    """Whether this build's config has a `channels` section."""
    from nodmix.config.schema import NodmixConfig

    return "channels" in NodmixConfig.__struct_fields__


def provider_choice(provider_id: str) -> ProviderChoice:
    """The choice with this id (`ValueError` naming the known ones otherwise)."""
    for choice in PROVIDERS:
        if choice.id == provider_id:
            return choice
    known = ", ".join(c.id for c in PROVIDERS)
    raise ValueError(f"unknown provider {provider_id!r} (choose one of: {known})")


@dataclass(frozen=True, slots=True)
class Answers:
    """What the user chose."""

    provider: str
    model: str
    api_key: str | None = None
    """A literal key, `${ENV_VAR}`, or None (the provider's usual variable, or no key)."""
    base_url: str | None = None
    code_mode: bool = False
    channel: str | None = None
    """A chat channel to add (`telegram`), with its defaults; its token comes from the env."""
    owner_id: str | None = None
    """The owner's sender id on `channel` (`channels.<id>.ownerIds`); without it the owner
    pairs later with `nodmix pairing approve <channel> <code> --owner`."""

    @property
    def model_ref(self) -> str:
        return f"{self.provider}/{self.model}"


def provider_entry(answers: Answers) -> dict[str, Any]:
    """The `models.providers.<id>` entry for the choice (what the preset lacks)."""
    entry: dict[str, Any] = {}
    if answers.provider == LOCAL_PROVIDER:
        entry["api"] = "openai-completions"
        entry["baseUrl"] = (answers.base_url or "").rstrip("/")
        entry["models"] = [{"id": answers.model}]
    elif answers.base_url:
        entry["baseUrl"] = answers.base_url.rstrip("/")
    if answers.api_key:
        entry["apiKey"] = answers.api_key
    return entry


def candidate_router(answers: Answers, env: Mapping[str, str]) -> ProviderRouter:
    """A router that knows just the chosen provider (to list its models and test it)."""
    import msgspec

    entry = provider_entry(answers)
    if answers.provider == LOCAL_PROVIDER:
        entry.pop("models", None)  # any model id, while the user is still choosing
    config = ModelsConfig(providers={answers.provider: msgspec.convert(entry, ProviderConfig)})
    return ProviderRouter(config, env)


def apply(doc: Mapping[str, Any], answers: Answers) -> dict[str, Any]:
    """`doc` (an existing config, or `{}`) with the answers written in."""
    from nodmix.config.edit import set_value

    out = copy.deepcopy(dict(doc))
    entry = provider_entry(answers)
    if entry:
        out = set_value(out, f"models.providers.{answers.provider}", entry)
    out = set_value(out, "agents.defaults.model.primary", answers.model_ref)
    if answers.channel and not _has(out, ("channels", answers.channel)):
        out = set_value(out, f"channels.{answers.channel}", {})
    if answers.channel and answers.owner_id:
        key = f"channels.{answers.channel}.ownerIds"
        section = out["channels"][answers.channel]
        owners = [str(o) for o in section.get("ownerIds") or []]
        if answers.owner_id not in owners:
            out = set_value(out, key, [*owners, answers.owner_id])
    existing = out.get("tools", {}).get("codeMode") if isinstance(out.get("tools"), dict) else None
    if isinstance(existing, dict):  # the object form keeps its other settings
        return set_value(out, "tools.codeMode.enabled", answers.code_mode)
    return set_value(out, "tools.codeMode", answers.code_mode)


def _has(doc: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    node: Any = doc
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def test_model(answers: Answers) -> tuple[bool, str]:
    """Send the chosen model one tiny request: whether it answered, and a line saying so."""
    import anyio

    from nodmix.providers.probe import ProbeResult, probe_model

    async def run() -> ProbeResult:
        router = candidate_router(answers, os.environ)
        try:
            return await probe_model(router, answers.model_ref)
        finally:
            await router.aclose()

    result = anyio.run(run)
    if result.ok:
        return True, f"test request: {answers.model_ref} answered in {result.latency_ms:.0f} ms"
    return False, f"test request: {answers.model_ref} failed: {result.detail}"
