"""Keyword and vector scores merged into one ranking.

Keyword: the query's words (stop words dropped) OR-ed into an FTS5 expression; FTS5 ranks by
BM25 with Porter stemming. BM25 alone is a poor score for a small memory (a word found in
most notes has an IDF near zero, so three notes all score about 0) and is unbounded, so the
keyword score is the share of the query's words the chunk contains, times `0.5 + 0.5 * s /
(s + 1)` where `s` is the BM25 strength (the negated `bm25()`): coverage decides, BM25 breaks
ties, and the score does not depend on the other hits.
Vector: cosine similarity of unit vectors, clipped to 0..1. Hybrid: a weighted sum, where a
chunk found by only one side gets 0 from the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from nodmix.catalog.stemming import porter_stem

_WORD = re.compile(r"\w+", re.UNICODE)

STOP_WORDS: Final = frozenset(
    """a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours out over own same she should so some such than that the their them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours remember told tell said say""".split()
)


def query_words(query: str) -> list[str]:
    """The searchable words of a query, lowercased, without stop words or duplicates."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    return list(dict.fromkeys(kept or [w for w in words if len(w) > 1]))


def query_words_all(text: str) -> list[str]:
    """Every word of a text, lowercased."""
    return [w.lower() for w in _WORD.findall(text)]


def stems(words: Iterable[str]) -> set[str]:
    """Porter stems, as FTS5's `porter` tokenizer makes them (so coverage agrees with MATCH)."""
    return {porter_stem(w) for w in words}


def fts_expression(words: Iterable[str]) -> str:
    """An FTS5 MATCH expression that matches any of the words (each quoted, so no syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def keyword_scores(
    hits: list[tuple[int, float]], coverage: Mapping[int, float]
) -> dict[int, float]:
    """0..1 scores from FTS5 `bm25()` values (negative, lower is better) and the share of the
    query's words each chunk contains."""
    scores = {}
    for chunk_id, rank in hits:
        strength = max(0.0, -rank)
        scores[chunk_id] = coverage.get(chunk_id, 0.0) * (0.5 + 0.5 * strength / (strength + 1))
    return scores


def merge(
    text: dict[int, float], vector: dict[int, float], *, vector_weight: float
) -> dict[int, float]:
    """Hybrid scores; with no vector scores the keyword scores pass through."""
    if not vector:
        return dict(text)
    weight = min(max(vector_weight, 0.0), 1.0)
    ids = set(text) | set(vector)
    return {i: weight * vector.get(i, 0.0) + (1 - weight) * text.get(i, 0.0) for i in ids}
