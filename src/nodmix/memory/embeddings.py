"""Vectors from an OpenAI-compatible `POST /v1/embeddings` (hosted or a local server).

The client is synchronous: indexing runs on a worker thread. Vectors are L2-normalised float32,
so a dot product is the cosine similarity. A reply is read in pieces under a byte cap and one
deadline for the whole request (`timeoutSeconds`), so an endpoint that answers without end,
or one byte at a time, cannot exhaust memory or hold the indexer. numpy is the `embeddings`
extra: without it a configured endpoint is refused with the install command, and search uses
keywords.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import httpx2

from nodmix.errors import NodmixError
from nodmix.memory.settings import EmbeddingSettings

if TYPE_CHECKING:  # numpy is the `embeddings` extra: imported where vectors are made
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

MAX_REPLY_BYTES = 64 * 1024 * 1024


class EmbeddingError(NodmixError):
    """The embeddings endpoint failed or answered something unusable."""


class Embedder(Protocol):
    """Turns texts into unit vectors (one row per text)."""

    @property
    def model(self) -> str:
        """The model id vectors are cached under."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...

    def close(self) -> None: ...


def normalise(matrix: Vectors) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero)."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    scaled: Vectors = (matrix / norms).astype(np.float32)
    return scaled


class HttpEmbedder:
    """An OpenAI-compatible embeddings endpoint."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.settings = settings
        headers = dict(settings.headers)
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._client = httpx2.Client(
            timeout=httpx2.Timeout(settings.timeout_seconds, connect=10.0), headers=headers
        )

    @property
    def model(self) -> str:
        """The configured model id."""
        return self.settings.model

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts in batches of `batchSize`.

        Raises:
            EmbeddingError: the endpoint is unreachable, slow, failing or malformed.
        """
        import numpy as np

        rows: list[list[float]] = []
        step = self.settings.batch_size
        for start in range(0, len(texts), step):
            rows.extend(self._batch(list(texts[start : start + step])))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise(np.asarray(rows, dtype=np.float32))

    def _post(self, url: str, texts: list[str]) -> tuple[int, bytes]:
        """Status and body, at most `MAX_REPLY_BYTES` within `timeoutSeconds` in all."""
        deadline = time.monotonic() + self.settings.timeout_seconds
        body = bytearray()
        payload = {"model": self.model, "input": texts}
        with self._client.stream("POST", url, json=payload) as response:
            for piece in response.iter_bytes():
                body += piece
                if len(body) > MAX_REPLY_BYTES:
                    raise EmbeddingError(f"embeddings reply from {url} is too large")
                if time.monotonic() > deadline:
                    raise EmbeddingError(
                        f"embeddings reply from {url} took longer than "
                        f"{self.settings.timeout_seconds:g}s"
                    )
            return response.status_code, bytes(body)

    def _batch(self, texts: list[str]) -> list[list[float]]:
        url = f"{self.settings.base_url}/embeddings"
        try:
            status, body = self._post(url, texts)
        except httpx2.HTTPError as exc:
            raise EmbeddingError(f"embeddings request to {url} failed: {exc}") from None
        if status >= 400:
            detail = body[:200].decode("utf-8", errors="replace")
            raise EmbeddingError(f"embeddings request to {url} failed: HTTP {status} {detail}")
        try:
            data = sorted(json.loads(body)["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embeddings reply from {url} is malformed: {exc}") from None
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1:
            raise EmbeddingError(f"embeddings reply from {url} does not match the request")
        return vectors
