"""Effective memory settings: the `memory` config section with its defaults filled in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import MemoryConfig

DEFAULT_CHUNK_TOKENS: Final = 400
DEFAULT_OVERLAP_TOKENS: Final = 80
DEFAULT_MAX_RESULTS: Final = 6
DEFAULT_MIN_SCORE: Final = 0.05
DEFAULT_VECTOR_WEIGHT: Final = 0.6
DEFAULT_EMBED_TIMEOUT: Final = 30.0
DEFAULT_EMBED_BATCH: Final = 64
CHARS_PER_TOKEN: Final = 4


class EmbeddingSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where vectors come from."""

    base_url: str
    model: str
    api_key: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout_seconds: float = DEFAULT_EMBED_TIMEOUT
    batch_size: int = DEFAULT_EMBED_BATCH


class MemorySettings(msgspec.Struct, frozen=True, kw_only=True):
    """Memory settings for one running Nodmix."""

    enabled: bool = True
    sessions: bool = False
    embeddings: EmbeddingSettings | None = None
    chunk_chars: int = DEFAULT_CHUNK_TOKENS * CHARS_PER_TOKEN
    overlap_chars: int = DEFAULT_OVERLAP_TOKENS * CHARS_PER_TOKEN
    max_results: int = DEFAULT_MAX_RESULTS
    min_score: float = DEFAULT_MIN_SCORE
    vector_weight: float = DEFAULT_VECTOR_WEIGHT

    @property
    def mode(self) -> str:
        """`hybrid` with embeddings, else `keyword`."""
        return "hybrid" if self.embeddings is not None else "keyword"


def resolve_memory_settings(
    config: MemoryConfig, env: Mapping[str, str] | None = None
) -> MemorySettings:
    """Fill in defaults; a `${ENV}` API key is resolved here.

    Raises:
        ConfigError: `memory.embeddings.apiKey` names an unset variable.
    """
    embeddings = None
    if config.embeddings is not None:
        e = config.embeddings
        embeddings = EmbeddingSettings(
            base_url=e.base_url.rstrip("/"),
            model=e.model,
            api_key=resolve_secret(e.api_key, key="memory.embeddings.apiKey", env=env),
            headers=dict(e.headers),
            timeout_seconds=e.timeout_seconds or DEFAULT_EMBED_TIMEOUT,
            batch_size=e.batch_size or DEFAULT_EMBED_BATCH,
        )
    chunk_tokens = config.chunk_tokens or DEFAULT_CHUNK_TOKENS
    overlap = (
        DEFAULT_OVERLAP_TOKENS
        if config.chunk_overlap_tokens is None
        else config.chunk_overlap_tokens
    )
    return MemorySettings(
        enabled=True if config.enabled is None else config.enabled,
        sessions=bool(config.sessions),
        embeddings=embeddings,
        chunk_chars=chunk_tokens * CHARS_PER_TOKEN,
        overlap_chars=min(overlap, chunk_tokens // 2) * CHARS_PER_TOKEN,
        max_results=config.max_results or DEFAULT_MAX_RESULTS,
        min_score=DEFAULT_MIN_SCORE if config.min_score is None else config.min_score,
        vector_weight=(
            DEFAULT_VECTOR_WEIGHT if config.vector_weight is None else config.vector_weight
        ),
    )
