"""`tools.codeMode` resolved to concrete, clamped settings, and the activation rule."""

from __future__ import annotations

import msgspec

from nodmix.config.schema import CodeModeConfig

SUSPENDED_RUN_CAP = 64
"""Suspended code-mode runs kept per process."""

DEFAULT_MAX_SOURCE_BYTES = 256 * 1024


class CodeModeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Code-mode settings with defaults applied and values clamped to the allowed ranges."""

    enabled: bool = False
    runtime: str = "quickjs-wasi"
    mode: str = "only"
    languages: tuple[str, ...] = ("javascript", "typescript")
    timeout_ms: int = 10_000
    memory_limit_bytes: int = 64 * 1024 * 1024
    max_output_bytes: int = 64 * 1024
    max_snapshot_bytes: int = 10 * 1024 * 1024
    max_pending_tool_calls: int = 16
    max_queued_tool_calls: int = 256
    """Calls that may wait for a free slot beyond `max_pending_tool_calls` (0: none)."""
    snapshot_ttl_seconds: int = 900
    search_default_limit: int = 8
    max_search_limit: int = 50
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES
    telemetry_to_model: bool = False
    """Whether the model reads `telemetry` in `exec`/`wait` results (it always stays in the
    result's details for hooks, events and the transcript)."""


def _clamp(value: int | None, default: int, low: int, high: int) -> int:
    # The default is clamped too: `searchDefaultLimit` (default 8) must not exceed a smaller
    # configured `maxSearchLimit`.
    return max(low, min(high, default if value is None else value))


def resolve_settings(value: bool | CodeModeConfig | None) -> CodeModeSettings:
    """Resolve `true`/`false`/object/absent. Only `enabled: true` turns code mode on."""
    if value is None or value is False:
        return CodeModeSettings(enabled=False)
    if value is True:
        return CodeModeSettings(enabled=True)
    max_search = _clamp(value.max_search_limit, 50, 1, 50)
    default_search = _clamp(value.search_default_limit, 8, 1, max_search)
    return CodeModeSettings(
        enabled=value.enabled is True,
        languages=tuple(dict.fromkeys(value.languages))
        if value.languages
        else ("javascript", "typescript"),
        timeout_ms=_clamp(value.timeout_ms, 10_000, 100, 60_000),
        memory_limit_bytes=_clamp(value.memory_limit_bytes, 64 * 1024 * 1024, 1 << 20, 1 << 30),
        max_output_bytes=_clamp(value.max_output_bytes, 64 * 1024, 1024, 10 * 1024 * 1024),
        max_snapshot_bytes=_clamp(value.max_snapshot_bytes, 10 * 1024 * 1024, 1024, 256 << 20),
        max_pending_tool_calls=_clamp(value.max_pending_tool_calls, 16, 1, 128),
        max_queued_tool_calls=_clamp(value.max_queued_tool_calls, 256, 0, 4096),
        snapshot_ttl_seconds=_clamp(value.snapshot_ttl_seconds, 900, 1, 86_400),
        search_default_limit=default_search,
        max_search_limit=max_search,
        max_source_bytes=_clamp(value.max_source_bytes, DEFAULT_MAX_SOURCE_BYTES, 1024, 16 << 20),
        telemetry_to_model=value.telemetry_to_model is True,
    )


def is_active(settings: CodeModeSettings, *, tools_disabled: bool, tool_count: int) -> bool:
    """Code mode takes over the tool surface only when enabled and the run has tools at all.

    Runs with no tools (`disableTools`, an empty `tools.allow`, raw model calls) keep their
    empty surface: code mode never adds `exec`/`wait` to a run that was meant to have none.
    """
    return settings.enabled and not tools_disabled and tool_count > 0
