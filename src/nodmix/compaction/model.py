"""The built-in summariser: a model call through the same provider router as agent turns.

`compaction.model` names one exact model (no fallbacks: the user picked it on purpose). Without
it, summaries use the session's own chain: the primary model, then its fallbacks for errors
that are not the request's fault (rate limits, outages). Retries happen one level up, in the
summary pipeline, so a failing model is not hammered by two nested retry loops.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from nodmix.compaction.base import SummaryRequest
from nodmix.errors import ProviderError
from nodmix.loop.model_call import ModelResolver
from nodmix.messages import user_message
from nodmix.providers.base import ModelRequest, ModelSpec, collect

log = logging.getLogger("nodmix.compaction")


class ModelSummarizer:
    """A `Summarizer` that asks a chain of models, in order.

    Args:
        models: Resolves `provider/model` references (the runtime's provider router).
        refs: The models to try; the first is the summarising model.
    """

    def __init__(self, models: ModelResolver, refs: Sequence[str]) -> None:
        if not refs:
            raise ValueError("ModelSummarizer needs at least one model reference")
        self._models = models
        self._refs = tuple(refs)
        self.used: str | None = None
        """The model that produced the last summary."""

    @property
    def spec(self) -> ModelSpec:
        """The primary summarising model (its window sizes the chunks)."""
        return self._models.resolve(self._refs[0]).spec

    async def __call__(self, request: SummaryRequest) -> str:
        """The summary text of the first model that answers.

        Raises:
            ProviderError: The last model's error, or the first one that is not worth passing
                to the next model.
        """
        for index, ref in enumerate(self._refs):
            resolved = self._models.resolve(ref)
            spec = resolved.spec
            model_request = ModelRequest(
                model=spec,
                system=request.system,
                messages=[user_message(request.prompt)],
                max_tokens=min(request.max_tokens, spec.max_tokens),
            )
            try:
                message = await collect(resolved.provider, model_request)
            except ProviderError as exc:
                if index == len(self._refs) - 1 or not exc.fallback_eligible:
                    raise
                log.warning(
                    "summary with %s failed (%s); trying %s", ref, exc, self._refs[index + 1]
                )
                continue
            self.used = spec.ref
            return message.text
        raise AssertionError("unreachable: the loop returns or raises")
