"""Effective compaction settings: `agents.*.compaction` resolved against one model's limits.

Every config field is optional ("use the default"). The defaults are sized for large hosted
models, so they are clamped against the actual context window: on a 4k or 8k local model the
reserve and the kept tail shrink so that a prompt always keeps at least half the window (up to
8,000 tokens) and the summary plus the kept tail fit comfortably in what remains.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Final, Literal, TypeAlias

import msgspec

from nodmix.config.schema import CompactionConfig, MemoryFlushConfig
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.compaction")

CompactionMode: TypeAlias = Literal["default", "safeguard", "off"]
IdentifierPolicy: TypeAlias = Literal["strict", "off", "custom"]

DEFAULT_RESERVE_TOKENS: Final = 20_000
"""Headroom kept free for the reply and the next tool results (16,384 plus a safety floor)."""
DEFAULT_KEEP_RECENT_TOKENS: Final = 20_000
DEFAULT_TIMEOUT_SECONDS: Final = 180.0
DEFAULT_FLUSH_SOFT_THRESHOLD: Final = 4_000
MIN_PROMPT_BUDGET: Final = 8_000
"""A prompt may always use at least this much of the window (or half of a smaller window)."""
MAX_HISTORY_SHARE: Final = 0.5
"""The kept tail may fill at most this share of the prompt budget."""

_SIZE = r"(?i)^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$"
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class MemoryFlushSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The silent turn before compaction that saves durable notes."""

    enabled: bool = True
    model: str | None = None
    """Exact `provider/model` for the flush turn; the session's models when `None`."""
    soft_threshold_tokens: int = DEFAULT_FLUSH_SOFT_THRESHOLD
    """The flush runs once the context is within this many tokens of compaction."""
    prompt: str | None = None
    system_prompt: str | None = None


class CompactionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Compaction settings for one agent and one model."""

    mode: CompactionMode = "safeguard"
    context_window: int = 128_000
    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    """Effective reserve, already clamped to the window."""
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    """Effective tail budget, already clamped."""
    keep_recent_explicit: bool = False
    """Whether `keepRecentTokens` was configured (manual compaction keeps a tail only then)."""
    model: str | None = None
    identifier_policy: IdentifierPolicy = "strict"
    identifier_instructions: str | None = None
    custom_instructions: str | None = None
    notify_user: bool = False
    memory_flush: MemoryFlushSettings = msgspec.field(default_factory=MemoryFlushSettings)
    truncate_after_compaction: bool = False
    max_active_transcript_bytes: int | None = None
    provider: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    model_max_tokens: int = 8_192

    @property
    def enabled(self) -> bool:
        """Whether automatic compaction (threshold, overflow, byte guard) runs."""
        return self.mode != "off"

    @property
    def prompt_budget(self) -> int:
        """Tokens a prompt may use before compaction is due: window minus reserve."""
        return self.context_window - self.reserve_tokens

    @property
    def summary_max_tokens(self) -> int:
        """Output budget of a summary call: most of the reserve, within the model's limit."""
        return max(256, min(int(self.reserve_tokens * 0.8), self.model_max_tokens))

    @property
    def byte_guard_active(self) -> bool:
        """The transcript byte guard only works when compaction starts a successor file."""
        return bool(self.max_active_transcript_bytes) and self.truncate_after_compaction

    @classmethod
    def resolve(
        cls, config: CompactionConfig | None, *, context_window: int, max_tokens: int = 8_192
    ) -> CompactionSettings:
        """Apply defaults and clamp them against the model's context window.

        Raises:
            ConfigError: `maxActiveTranscriptBytes` is not a size such as `20mb`.
        """
        config = config or CompactionConfig()
        window = max(1, context_window)
        reserve, keep = clamp_budgets(
            window,
            reserve=config.reserve_tokens,
            keep=config.keep_recent_tokens,
        )
        mode: CompactionMode = config.mode or "safeguard"
        if config.provider:
            # A configured provider forces safeguard whatever the mode says, "off" included:
            # plugin summaries get our quality checks, and a provider is there to be used.
            if mode == "off":
                _warn_provider_overrides_off(config.provider)
            mode = "safeguard"
        return cls(
            mode=mode,
            context_window=window,
            reserve_tokens=reserve,
            keep_recent_tokens=keep,
            keep_recent_explicit=config.keep_recent_tokens is not None,
            model=config.model or None,
            identifier_policy=config.identifier_policy or "strict",
            identifier_instructions=config.identifier_instructions,
            custom_instructions=config.custom_instructions,
            notify_user=bool(config.notify_user),
            memory_flush=_flush(config.memory_flush, budget=window - reserve),
            truncate_after_compaction=bool(config.truncate_after_compaction),
            max_active_transcript_bytes=parse_size(config.max_active_transcript_bytes),
            provider=config.provider or None,
            timeout_seconds=float(config.timeout_seconds or DEFAULT_TIMEOUT_SECONDS),
            model_max_tokens=max(1, max_tokens),
        )


def clamp_budgets(window: int, *, reserve: int | None, keep: int | None) -> tuple[int, int]:
    """The effective reserve and kept-tail budgets for a context window.

    The reserve never leaves the prompt less than `min(8000, window / 2)` tokens; the kept tail
    never takes more than half of the resulting prompt budget, so a summary fits beside it.
    """
    min_prompt = min(MIN_PROMPT_BUDGET, window // 2)
    wanted = DEFAULT_RESERVE_TOKENS if reserve is None else max(0, reserve)
    effective_reserve = min(wanted, max(0, window - min_prompt))
    budget = window - effective_reserve
    wanted_keep = DEFAULT_KEEP_RECENT_TOKENS if keep is None else max(0, keep)
    effective_keep = min(wanted_keep, int(budget * MAX_HISTORY_SHARE))
    return effective_reserve, effective_keep


def parse_size(value: int | str | None) -> int | None:
    """Bytes of a size setting: a number, or text such as `512kb`, `20mb`, `1.5gb`.

    Raises:
        ConfigError: The text is not a size.
    """
    if value is None:
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    match = re.match(_SIZE, value)
    if match is None:
        raise ConfigError(
            f"expected a size such as 20mb, got {value!r}",
            key="agents.defaults.compaction.maxActiveTranscriptBytes",
        )
    unit = (match.group(2) or "").lower()[:1]
    size = int(float(match.group(1)) * _UNITS[unit if unit != "b" else ""])
    return size if size > 0 else None


def _flush(config: MemoryFlushConfig | None, *, budget: int) -> MemoryFlushSettings:
    config = config or MemoryFlushConfig()
    threshold = config.soft_threshold_tokens
    threshold = DEFAULT_FLUSH_SOFT_THRESHOLD if threshold is None else max(0, threshold)
    return MemoryFlushSettings(
        enabled=True if config.enabled is None else config.enabled,
        model=config.model or None,
        # On a small window 4,000 tokens may be the whole budget: flush in its last quarter.
        soft_threshold_tokens=min(threshold, budget // 4),
        prompt=config.prompt,
        system_prompt=config.system_prompt,
    )


@functools.lru_cache(maxsize=8)
def _warn_provider_overrides_off(provider: str) -> None:
    """Said once per provider and process: the settings are resolved on every turn."""
    log.warning(
        "compaction.provider %r forces compaction mode 'safeguard': mode 'off' is ignored "
        "(remove compaction.provider to turn automatic compaction off)",
        provider,
    )
