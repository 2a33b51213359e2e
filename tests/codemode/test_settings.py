"""`tools.codeMode`: true/false/object, defaults and clamps exactly as the spec's table, and the
per-agent override merged over the global value. Only `enabled: true` turns code mode on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nodmix.agents import resolve_agent
from nodmix.codemode import is_active, resolve_settings
from nodmix.codemode.settings import SUSPENDED_RUN_CAP, CodeModeSettings
from nodmix.config import load_config
from nodmix.config.schema import CodeModeConfig
from nodmix.errors import ConfigError

MiB = 1 << 20


def _settings_from_file(isolated_state: Path, tools: dict[str, Any], agent: str = "main") -> Any:
    path = isolated_state / "nodmix.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    loaded = load_config(path)
    return resolve_settings(resolve_agent(loaded.config, agent).code_mode)


def test_defaults_match_the_spec_table() -> None:
    settings = resolve_settings(True)
    assert settings == CodeModeSettings(
        enabled=True,
        runtime="quickjs-wasi",
        mode="only",
        languages=("javascript", "typescript"),
        timeout_ms=10_000,
        memory_limit_bytes=67_108_864,
        max_output_bytes=65_536,
        max_snapshot_bytes=10_485_760,
        max_pending_tool_calls=16,
        max_queued_tool_calls=256,
        snapshot_ttl_seconds=900,
        search_default_limit=8,
        max_search_limit=50,
        max_source_bytes=256 * 1024,
        telemetry_to_model=False,
    )
    assert resolve_settings(CodeModeConfig(enabled=True)) == settings
    assert SUSPENDED_RUN_CAP == 64


@pytest.mark.parametrize("value", [None, False, CodeModeConfig(), CodeModeConfig(enabled=False)])
def test_omitted_false_or_object_without_enabled_true_stays_disabled(value: Any) -> None:
    assert resolve_settings(value).enabled is False


def test_setting_other_fields_never_enables_code_mode() -> None:
    settings = resolve_settings(
        CodeModeConfig(timeout_ms=5000, languages=["javascript"], max_pending_tool_calls=4)
    )
    assert settings.enabled is False
    assert not is_active(settings, tools_disabled=False, tool_count=10)


@pytest.mark.parametrize(
    ("field", "low_in", "low_out", "high_in", "high_out"),
    [
        ("timeout_ms", 1, 100, 10**9, 60_000),
        ("memory_limit_bytes", 1, MiB, 1 << 40, 1 << 30),
        ("max_output_bytes", 0, 1024, 1 << 40, 10 * MiB),
        ("max_snapshot_bytes", -5, 1024, 1 << 40, 256 * MiB),
        ("max_pending_tool_calls", 0, 1, 10_000, 128),
        ("max_queued_tool_calls", -1, 0, 10**6, 4096),
        ("snapshot_ttl_seconds", 0, 1, 10**7, 86_400),
        ("max_search_limit", 0, 1, 500, 50),
        ("max_source_bytes", 0, 1024, 1 << 40, 16 * MiB),
    ],
)
def test_numeric_fields_are_clamped_to_the_spec_ranges(
    field: str, low_in: int, low_out: int, high_in: int, high_out: int
) -> None:
    low = resolve_settings(msgspec.structs.replace(CodeModeConfig(enabled=True), **{field: low_in}))
    high = resolve_settings(
        msgspec.structs.replace(CodeModeConfig(enabled=True), **{field: high_in})
    )
    assert getattr(low, field) == low_out
    assert getattr(high, field) == high_out


def test_values_inside_the_ranges_are_kept_exactly() -> None:
    settings = resolve_settings(
        CodeModeConfig(
            enabled=True,
            timeout_ms=100,
            memory_limit_bytes=MiB,
            max_output_bytes=10 * MiB,
            max_snapshot_bytes=1024,
            max_pending_tool_calls=128,
            snapshot_ttl_seconds=1,
            search_default_limit=3,
            max_search_limit=20,
        )
    )
    assert (settings.timeout_ms, settings.memory_limit_bytes) == (100, MiB)
    assert (settings.max_output_bytes, settings.max_snapshot_bytes) == (10 * MiB, 1024)
    assert (settings.max_pending_tool_calls, settings.snapshot_ttl_seconds) == (128, 1)
    assert (settings.search_default_limit, settings.max_search_limit) == (3, 20)


def test_search_default_limit_is_clamped_to_max_search_limit() -> None:
    over = resolve_settings(
        CodeModeConfig(enabled=True, search_default_limit=40, max_search_limit=10)
    )
    assert over.search_default_limit == 10
    default_over_small_max = resolve_settings(CodeModeConfig(enabled=True, max_search_limit=5))
    assert default_over_small_max.search_default_limit == 5
    zero = resolve_settings(CodeModeConfig(enabled=True, search_default_limit=0))
    assert zero.search_default_limit == 1


def test_languages_accept_any_subset_and_drop_duplicates() -> None:
    only_js = resolve_settings(CodeModeConfig(enabled=True, languages=["javascript"]))
    assert only_js.languages == ("javascript",)
    only_ts = resolve_settings(CodeModeConfig(enabled=True, languages=["typescript", "typescript"]))
    assert only_ts.languages == ("typescript",)


def test_config_file_accepts_boolean_and_object_forms(isolated_state: Path) -> None:
    assert _settings_from_file(isolated_state, {"tools": {"codeMode": True}}).enabled
    assert not _settings_from_file(isolated_state, {"tools": {"codeMode": False}}).enabled
    assert not _settings_from_file(isolated_state, {}).enabled
    obj = _settings_from_file(
        isolated_state, {"tools": {"codeMode": {"enabled": True, "timeoutMs": 250}}}
    )
    assert obj.enabled and obj.timeout_ms == 250
    camel = _settings_from_file(
        isolated_state,
        {
            "tools": {
                "codeMode": {"enabled": True, "maxSourceBytes": 4096, "telemetryToModel": True}
            }
        },
    )
    assert (camel.max_source_bytes, camel.telemetry_to_model) == (4096, True)
    assert not _settings_from_file(
        isolated_state, {"tools": {"codeMode": {"timeoutMs": 250, "maxSearchLimit": 3}}}
    ).enabled


@pytest.mark.parametrize(
    "code_mode",
    [{"runtime": "node"}, {"mode": "auto"}, {"languages": ["python"]}, {"enable": True}],
)
def test_config_file_rejects_unsupported_values(isolated_state: Path, code_mode: Any) -> None:
    with pytest.raises(ConfigError):
        _settings_from_file(isolated_state, {"tools": {"codeMode": code_mode}})


def test_agent_override_is_shallow_merged_over_the_global_value(isolated_state: Path) -> None:
    config = {
        "tools": {"codeMode": {"enabled": True, "timeoutMs": 5000, "maxPendingToolCalls": 4}},
        "agents": {
            "list": [
                {"id": "fast", "tools": {"codeMode": {"timeoutMs": 2000}}},
                {"id": "direct", "tools": {"codeMode": False}},
                {"id": "plain"},
            ]
        },
    }
    fast = _settings_from_file(isolated_state, config, "fast")
    assert fast.enabled and fast.timeout_ms == 2000 and fast.max_pending_tool_calls == 4
    assert not _settings_from_file(isolated_state, config, "direct").enabled
    plain = _settings_from_file(isolated_state, config, "plain")
    assert plain.enabled and plain.timeout_ms == 5000


def test_agent_can_enable_or_only_tune_code_mode_per_agent(isolated_state: Path) -> None:
    config = {
        "tools": {"codeMode": False},
        "agents": {
            "list": [
                {"id": "coder", "tools": {"codeMode": True}},
                {"id": "tuned", "tools": {"codeMode": {"timeoutMs": 300}}},
            ]
        },
    }
    assert _settings_from_file(isolated_state, config, "coder").enabled
    assert not _settings_from_file(isolated_state, config, "tuned").enabled  # fields only
    assert not _settings_from_file(isolated_state, config, "main").enabled


def test_activation_needs_enabled_settings_and_at_least_one_tool() -> None:
    on, off = resolve_settings(True), resolve_settings(False)
    assert is_active(on, tools_disabled=False, tool_count=1)
    assert not is_active(on, tools_disabled=True, tool_count=5)
    assert not is_active(on, tools_disabled=False, tool_count=0)
    assert not is_active(off, tools_disabled=False, tool_count=5)
