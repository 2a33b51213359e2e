"""Effective compaction settings: defaults, and clamping against small context windows."""

from __future__ import annotations

import pytest

from nodmix.compaction.settings import CompactionSettings, clamp_budgets, parse_size
from nodmix.config.schema import CompactionConfig, MemoryFlushConfig
from nodmix.errors import ConfigError


def test_defaults_on_a_large_model_keep_20k_reserve_and_20k_tail() -> None:
    settings = CompactionSettings.resolve(None, context_window=200_000)
    assert settings.mode == "safeguard" and settings.enabled
    assert (settings.reserve_tokens, settings.keep_recent_tokens) == (20_000, 20_000)
    assert settings.prompt_budget == 180_000
    assert settings.identifier_policy == "strict"
    assert settings.memory_flush.enabled and settings.memory_flush.soft_threshold_tokens == 4000


@pytest.mark.parametrize(
    ("window", "reserve", "expected_reserve", "expected_budget"),
    [
        (16_000, 20_000, 8_000, 8_000),
        (32_000, 20_000, 20_000, 12_000),
        (4_096, None, 2_048, 2_048),
        (8_192, 1_000, 1_000, 7_192),
    ],
)
def test_reserve_never_leaves_the_prompt_less_than_half_the_window_or_8000(
    window: int, reserve: int | None, expected_reserve: int, expected_budget: int
) -> None:
    effective, keep = clamp_budgets(window, reserve=reserve, keep=None)
    assert effective == expected_reserve
    assert window - effective == expected_budget
    assert keep <= expected_budget // 2


def test_explicit_keep_budget_is_remembered_for_manual_compaction() -> None:
    settings = CompactionSettings.resolve(
        CompactionConfig(keep_recent_tokens=500), context_window=100_000
    )
    assert settings.keep_recent_tokens == 500 and settings.keep_recent_explicit


@pytest.mark.parametrize("mode", [None, "default", "safeguard", "off"])
def test_a_configured_provider_forces_safeguard_mode_whatever_the_mode(mode: str | None) -> None:
    config = CompactionConfig(mode=mode, provider="mine")  # type: ignore[arg-type]
    settings = CompactionSettings.resolve(config, context_window=50_000)
    assert settings.mode == "safeguard" and settings.enabled


def test_mode_off_disables_automatic_compaction() -> None:
    settings = CompactionSettings.resolve(CompactionConfig(mode="off"), context_window=50_000)
    assert not settings.enabled


def test_memory_flush_settings_come_from_config() -> None:
    flush = MemoryFlushConfig(enabled=False, model="ollama/qwen3:8b", soft_threshold_tokens=100)
    settings = CompactionSettings.resolve(
        CompactionConfig(memory_flush=flush), context_window=50_000
    )
    assert not settings.memory_flush.enabled
    assert settings.memory_flush.model == "ollama/qwen3:8b"
    assert settings.memory_flush.soft_threshold_tokens == 100


def test_summary_output_budget_stays_within_the_models_max_tokens() -> None:
    settings = CompactionSettings.resolve(None, context_window=200_000, max_tokens=4096)
    assert settings.summary_max_tokens == 4096


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (1024, 1024),
        ("20mb", 20 * 1024**2),
        ("512 KB", 512 * 1024),
        ("1.5gb", int(1.5 * 1024**3)),
        ("300", 300),
    ],
)
def test_transcript_size_limits_accept_numbers_and_units(
    value: int | str | None, expected: int | None
) -> None:
    assert parse_size(value) == expected


def test_a_size_that_is_not_a_size_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_size("twenty megs")
    assert caught.value.key is not None and "maxActiveTranscriptBytes" in caught.value.key


def test_byte_guard_needs_successor_transcripts() -> None:
    without = CompactionSettings.resolve(
        CompactionConfig(max_active_transcript_bytes="1mb"), context_window=50_000
    )
    with_rotation = CompactionSettings.resolve(
        CompactionConfig(max_active_transcript_bytes="1mb", truncate_after_compaction=True),
        context_window=50_000,
    )
    assert not without.byte_guard_active and with_rotation.byte_guard_active
