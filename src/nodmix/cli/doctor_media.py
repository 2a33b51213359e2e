"""`nodmix doctor`'s voice checks: speech to text (`tools.media.audio`) and text to speech
(`messages.tts`), like the model check: the provider they name exists, speaks the
OpenAI-compatible API, has its key, and answers an authenticated `GET {baseUrl}/models`
within a deadline; ffmpeg is on PATH when spoken replies need converting. Also the code-mode
run files a start moved aside as damaged. One finding per problem, each one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nodmix.cli.doctor_channels import Finding
from nodmix.invocation import nodmix_command

PROBE_SECONDS = 5.0
_FFMPEG_FIX = "apt-get install ffmpeg (or `make media` in the Nodmix checkout)"


def media_findings(config: Any, *, offline: bool) -> list[Finding]:
    """Findings for the voice features that are configured (none when neither is)."""
    from nodmix.media.settings import audio_settings, speech_settings

    findings: list[Finding] = []
    audio = audio_settings(config)
    section = config.tools.media.audio if config.tools.media is not None else None
    if audio.provider is not None:
        findings.append(
            _provider("speech to text", config, audio.provider, "tools.media.audio", offline)
        )
    elif section is not None and section.enabled:
        findings.append(
            (
                "speech to text",
                "error",
                "tools.media.audio.enabled is true but no provider is named, so voice notes "
                "are not transcribed",
                _set("tools.media.audio.provider", "openai"),
            )
        )
    speech = speech_settings(config)
    if speech.provider is not None:
        finding = _provider("text to speech", config, speech.provider, "messages.tts", offline)
        findings.append(finding)
        if finding[1] == "ok" and speech.format != "opus":
            findings.extend(_ffmpeg(speech.format))
    elif speech.auto != "off":
        findings.append(
            (
                "text to speech",
                "error",
                f'messages.tts.auto is "{speech.auto}" but messages.tts.provider is not set, '
                "so no reply is spoken",
                _set("messages.tts.provider", "openai"),
            )
        )
    return findings


def damaged_run_findings(state_dir: Path) -> list[Finding]:
    """The code-mode run files that could not be read and were moved aside at a start."""
    try:
        from nodmix.codemode.run_io import DAMAGED_FOLDER
    except ImportError:  # reported by the code-mode modules check
        return []
    folder = state_dir / "codemode" / "runs" / DAMAGED_FOLDER
    try:
        count = sum(1 for _ in folder.iterdir())
    except OSError:
        return []
    if not count:
        return []
    return [
        (
            "code mode runs",
            "warn",
            f"{count} damaged run file(s) kept in {folder}: those runs cannot be resumed "
            "(run their programs again)",
            f"look into them if you wish, then delete them: rm -r {folder}",
        )
    ]


def _set(key: str, value: str) -> str:
    return f"`{nodmix_command()} config set {key} {value}` (any models.providers id)"


def _provider(name: str, config: Any, provider_id: str, key: str, offline: bool) -> Finding:
    from nodmix.errors import NodmixError
    from nodmix.media.service import OPENAI_API
    from nodmix.providers.router import ProviderRouter

    router = ProviderRouter(config.models, os.environ)
    try:
        definition = router.definition(provider_id)
    except NodmixError as exc:
        fix = f"set {key}.provider to one of models.providers, or define {provider_id!r} there"
        return (name, "error", f"{key}.provider: {exc}", fix)
    if definition.api != OPENAI_API:
        return (
            name,
            "error",
            f"{key}.provider: {provider_id!r} speaks {definition.api}, which has no audio "
            "endpoints",
            "name a provider with an OpenAI-compatible API (api: openai-completions)",
        )
    try:
        api_key = router.api_key(provider_id)
    except NodmixError as exc:
        return (name, "error", str(exc), f"set models.providers.{provider_id}.apiKey")
    if offline:
        return (name, "ok", f"{provider_id} configured (not contacted: --offline)", None)
    return _probe(name, provider_id, definition, api_key)


def _probe(name: str, provider_id: str, definition: Any, api_key: str | None) -> Finding:
    """A cheap authenticated `GET {baseUrl}/models` (the audio endpoints themselves cost)."""
    import httpx2

    base = definition.base_url.rstrip("/")
    headers = dict(definition.headers)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        response = httpx2.get(f"{base}/models", headers=headers, timeout=PROBE_SECONDS)
    except httpx2.TimeoutException:
        return (
            name,
            "error",
            f"{provider_id}: no answer from {base} within {PROBE_SECONDS:g} s",
            f"check models.providers.{provider_id}.baseUrl and that the server is up",
        )
    except httpx2.HTTPError as exc:
        return (
            name,
            "error",
            f"{provider_id}: {base} is not reachable ({type(exc).__name__})",
            f"start that server, or check models.providers.{provider_id}.baseUrl",
        )
    if response.status_code in (401, 403):
        return (
            name,
            "error",
            f"{provider_id}: {base} rejected the API key ({response.status_code})",
            f"check models.providers.{provider_id}.apiKey",
        )
    if response.status_code >= 400:
        return (name, "warn", f"{provider_id}: {base}/models answered {response.status_code}", None)
    return (name, "ok", f"{provider_id} reachable at {base}", None)


def _ffmpeg(fmt: str) -> list[Finding]:
    from nodmix.media.convert import ffmpeg_path

    if ffmpeg_path() is not None:
        return []
    return [
        (
            "ffmpeg",
            "warn",
            f"ffmpeg is missing: spoken replies in {fmt} cannot become voice messages "
            "(they go as audio files)",
            f"{_FFMPEG_FIX}, or set messages.tts.format to opus",
        )
    ]
