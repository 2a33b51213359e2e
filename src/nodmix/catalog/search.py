"""Ranking for `tools.search(query)`: exact matches first, then BM25F over tool fields.

Plain substring counting (the reference design) ties constantly and lets a long description
outrank the tool whose name says exactly what was asked. Here:

1. an entry whose name or id equals the query (or whose name equals the query's words joined
   by `_`) ranks first;
2. every other entry is scored with BM25F: query terms (lowercased, split on punctuation and
   camelCase/snake_case, lightly stemmed, stop words dropped) matched as whole words in four
   fields weighted name 4 > id 3 > label 2 > description 1, with per-field length normalisation
   and inverse document frequency over the catalog;
3. a term that is only a prefix (≥ 3 characters) of a field word counts at a third of the weight,
   so `calend` still finds `calendar_list`;
4. ties are broken by catalog order (ids in a fixed collation), so results are deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_SPLIT_RE = re.compile(r"[^a-z0-9]+")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
STOP_WORDS = frozenset(
    "a an the to of for and or in on at by with from into via as is are be it this that my me "
    "i you your our we please can could would should some any all do does using use".split()
)
FIELD_WEIGHTS = {"name": 4.0, "id": 3.0, "label": 2.0, "description": 1.0}
_K1 = 1.2
_B = 0.75
_PREFIX_FACTOR = 1 / 3
_EXACT_BONUS = 1000.0


def stem(word: str) -> str:
    """A deliberately small suffix stripper (files→file, reading→read, listed→list)."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and not word.endswith(("sses", "ches", "shes", "xes")):
                continue
            if suffix == "s" and word.endswith("ss"):
                continue
            return word[: len(word) - len(suffix)] + keep
    return word


def tokenize(text: str, *, drop_stop_words: bool = False) -> list[str]:
    """Lowercased, stemmed words of `text`, splitting camelCase and snake_case."""
    spaced = _CAMEL_RE.sub(" ", text)
    words = [w for w in _SPLIT_RE.split(spaced.lower()) if w]
    if drop_stop_words:
        kept = [w for w in words if w not in STOP_WORDS]
        words = kept or words
    return [stem(w) for w in words]


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """One searchable entry: its fields, tokenised once when the catalog is built."""

    key: str
    name: str
    id: str
    fields: dict[str, list[str]]


def make_doc(*, key: str, name: str, id: str, label: str | None, description: str) -> SearchDoc:
    """Tokenise an entry's fields."""
    return SearchDoc(
        key=key,
        name=name.lower(),
        id=id.lower(),
        fields={
            "name": tokenize(name),
            "id": tokenize(id),
            "label": tokenize(label or ""),
            "description": tokenize(description),
        },
    )


class SearchIndex:
    """BM25F index over catalog entries, built once per catalog."""

    def __init__(self, docs: Sequence[SearchDoc]) -> None:
        self._docs = list(docs)
        self._avg = {
            f: (sum(len(d.fields[f]) for d in docs) / len(docs)) if docs else 1.0
            for f in FIELD_WEIGHTS
        }
        self._counts = [{f: Counter(d.fields[f]) for f in FIELD_WEIGHTS} for d in self._docs]
        df: Counter[str] = Counter()
        for d in self._docs:
            df.update({w for f in FIELD_WEIGHTS for w in d.fields[f]})
        n = len(self._docs)
        self._idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self._default_idf = math.log(1 + (n + 0.5) / 0.5) if n else 1.0

    def rank(self, query: str) -> list[str]:
        """Keys of matching entries, best first; every entry (in order) for an empty query."""
        raw = query.strip().lower()
        terms = tokenize(query, drop_stop_words=True)
        if not terms:
            return [d.key for d in self._docs]
        joined = "_".join(_SPLIT_RE.split(raw)).strip("_")
        scored: list[tuple[float, int, str]] = []
        for index, doc in enumerate(self._docs):
            score = self._score(index, terms)
            if raw in (doc.name, doc.id) or (joined and joined == doc.name):
                score += _EXACT_BONUS
            if score > 0:
                scored.append((-score, index, doc.key))
        scored.sort()
        return [key for _, _, key in scored]

    def _score(self, index: int, terms: list[str]) -> float:
        doc = self._docs[index]
        counts = self._counts[index]
        total = 0.0
        for term in dict.fromkeys(terms):  # repeated query words do not count twice
            weighted_tf = 0.0
            for field, weight in FIELD_WEIGHTS.items():
                tf = float(counts[field].get(term, 0))
                if tf == 0 and len(term) >= 3:
                    tf = _PREFIX_FACTOR * sum(
                        1 for w in doc.fields[field] if w != term and w.startswith(term)
                    )
                if tf:
                    norm = 1 - _B + _B * len(doc.fields[field]) / (self._avg[field] or 1.0)
                    weighted_tf += weight * tf / norm
            if weighted_tf:
                idf = self._idf.get(term, self._default_idf)
                total += idf * weighted_tf * (_K1 + 1) / (weighted_tf + _K1)
        return total


def substring_rank(
    entries: Sequence[tuple[str, str, str, str | None, str]], query: str
) -> list[str]:
    """The reference design's plain substring-count ranking, kept as a benchmark baseline.

    `entries` are `(key, name, id, label, description)`; scoring per term: name or id equal +20,
    in name +8, in id +6, in label +4, in description +2; ties by key.
    """
    terms = [t.strip() for t in re.split(r"[^a-z0-9_./:-]+", query.lower()) if t.strip()]
    scored = []
    for key, name, id_, label, description in entries:
        name, id_, lab, desc = name.lower(), id_.lower(), (label or "").lower(), description.lower()
        score = 0 if terms else 1
        for t in terms:
            score += 20 if t in (name, id_) else 0
            score += 8 if t in name else 0
            score += 6 if t in id_ else 0
            score += 4 if t in lab else 0
            score += 2 if t in desc else 0
        if score > 0:
            scored.append((-score, key))
    scored.sort()
    return [key for _, key in scored]
