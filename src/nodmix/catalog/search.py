"""Ranking for `tools.search(query)`: exact matches first, then BM25F over tool fields.

Plain substring counting ties constantly and lets a long description
outrank the tool whose name says exactly what was asked. Here:

1. an entry whose name or id equals the query (or whose name equals the query's words joined
   by `_`) ranks first;
2. every other entry is scored with BM25F: query terms (lowercased, split on punctuation and
   camelCase/snake_case, Porter-stemmed, stop words and question words dropped) matched as whole
   words in five fields weighted name 4 > id 3 > label 2 > description 1 > parameters 0.5 (the
   input schema's property names, descriptions and enum values), with per-field length
   normalisation and inverse document frequency over the catalog;
3. a query word may also match through a small table of synonyms common in tool catalogs
   (`get`/`fetch`/`retrieve`, `delete`/`remove`, `vm`/`instance`, `invoice`/`bill`, ...), at half
   weight; a word the catalog does not contain at all (≥ 3 characters) matches the words it is
   a prefix of at a third of the weight, so `calend` still finds `calendar_list`. Each form is
   scored with its own document frequency and a word's forms add up (a query word repeated in
   the query still counts once);
4. ties are broken by catalog order (ids in a fixed collation), so results are deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodmix.catalog.stemming import porter_stem

_SPLIT_RE = re.compile(r"[^a-z0-9]+")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
STOP_WORDS = frozenset(
    "a an the to of for and or in on at by with from into via as is are be it this that my me "
    "i you your our we please can could would should some any all do does using use "
    "how what which who whom whose where when why there their them they its was were been has "
    "have had did just up out so than then also about".split()
)
FIELD_WEIGHTS = {"name": 4.0, "id": 3.0, "label": 2.0, "description": 1.0, "parameters": 0.5}
SYNONYMS: tuple[str, ...] = (
    "get fetch retrieve read show view display",
    "find search lookup locate query",
    "create add new make insert register save store",
    "update edit change modify",
    "delete remove erase destroy purge wipe",
    "cancel void revoke abort",
    "stop halt shutdown",
    "start launch boot trigger begin",
    "restart reboot",
    "approve accept confirm",
    "reject decline deny refuse",
    "schedule book reserve arrange",
    "send deliver dispatch",
    "summary summarize summarise digest recap overview",
    "meeting event appointment",
    "free available availability busy freebusy",
    "employee staff colleague coworker personnel worker",
    "customer client buyer shopper",
    "company organization organisation business firm",
    "invoice bill",
    "payment charge transaction",
    "refund reimburse reimbursement",
    "document doc file",
    "package parcel shipment",
    "vm instance server machine host",
    "repo repository",
    "pr pull",
    "bug issue defect",
    "error failure fail exception crash",
    "log logs output console",
    "vacation holiday leave pto absence",
    "salary pay payroll wage compensation",
    "password secret credential",
    "laptop device computer hardware",
    "sms text",
    "phone telephone mobile cell",
    "spreadsheet sheet workbook excel",
    "wiki documentation knowledge confluence",
    "email mail inbox mailbox",
    "cost spend spending",
    "price rate quote",
    "revenue sales income earnings",
    "sell sale sold",
    "login signin authentication",
    "mfa 2fa otp authenticator",
    "deploy deployment release rollout",
    "rollback revert undo",
    "note comment memo",
    "task todo chore",
    "contract agreement",
    "route directions navigation",
    "label tag category",
)
_K1 = 1.2
_B = 0.75
_PREFIX_FACTOR = 1 / 3
_SYNONYM_FACTOR = 0.5
_EXACT_BONUS = 1000.0


def stem(word: str) -> str:
    """The search stem of a lowercase word (Porter: files→file, scheduling→schedul)."""
    return porter_stem(word)


def tokenize(text: str, *, drop_stop_words: bool = False) -> list[str]:
    """Lowercased, stemmed words of `text`, splitting camelCase and snake_case."""
    spaced = _CAMEL_RE.sub(" ", text)
    words = [w for w in _SPLIT_RE.split(spaced.lower()) if w]
    if drop_stop_words:
        kept = [w for w in words if w not in STOP_WORDS]
        words = kept or words
    return [stem(w) for w in words]


def _synonym_table() -> dict[str, tuple[str, ...]]:
    table: dict[str, list[str]] = {}
    for group in SYNONYMS:
        stems = list(dict.fromkeys(stem(w) for w in group.split()))
        for s in stems:
            table.setdefault(s, []).extend(o for o in stems if o != s and o not in table[s])
    return {k: tuple(v) for k, v in table.items()}


_SYNONYM_TABLE = _synonym_table()


def schema_text(schema: Mapping[str, Any] | None, depth: int = 0) -> str:
    """Property names, descriptions and enum values of an input schema (two levels deep)."""
    if not isinstance(schema, Mapping) or depth > 1:
        return ""
    parts: list[str] = []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            parts.append(str(name))
            if isinstance(sub, Mapping):
                description = sub.get("description")
                if isinstance(description, str):
                    parts.append(description)
                enum = sub.get("enum")
                if isinstance(enum, list):
                    parts.extend(str(v) for v in enum)
                parts.append(schema_text(sub, depth + 1))
    return " ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """One searchable entry: its fields, tokenised once when the catalog is built."""

    key: str
    name: str
    id: str
    fields: dict[str, list[str]]


def make_doc(
    *,
    key: str,
    name: str,
    id: str,
    label: str | None,
    description: str,
    parameters: Mapping[str, Any] | None = None,
) -> SearchDoc:
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
            "parameters": tokenize(schema_text(parameters)),
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
        self._norms = [
            {f: 1 - _B + _B * len(d.fields[f]) / (self._avg[f] or 1.0) for f in FIELD_WEIGHTS}
            for d in self._docs
        ]
        df: Counter[str] = Counter()
        for d in self._docs:
            df.update({w for f in FIELD_WEIGHTS for w in d.fields[f]})
        self._df = df
        n = len(self._docs)
        self._n = n
        self._idf = {w: self._idf_of(c) for w, c in df.items()}

    def _idf_of(self, count: int) -> float:
        return math.log(1 + (self._n - count + 0.5) / (count + 0.5))

    def _forms(self, term: str) -> list[tuple[float, frozenset[str], float]]:
        """How a query word can match: `(weight, words, idf)` per form."""
        forms: list[tuple[float, frozenset[str], float]] = []
        if term in self._df:
            forms.append((1.0, frozenset([term]), self._idf[term]))
        elif len(term) >= 3:
            words = frozenset(w for w in self._df if w.startswith(term))
            if words:
                count = sum(1 for d in self._docs if any(w in words for w in _words(d)))
                forms.append((_PREFIX_FACTOR, words, self._idf_of(count)))
        forms.extend(
            (_SYNONYM_FACTOR, frozenset([synonym]), self._idf[synonym])
            for synonym in _SYNONYM_TABLE.get(term, ())
            if synonym in self._df
        )
        return forms

    def rank(self, query: str) -> list[str]:
        """Keys of matching entries, best first; every entry (in order) for an empty query."""
        raw = query.strip().lower()
        terms = tokenize(query, drop_stop_words=True)
        if not terms:
            return [d.key for d in self._docs]
        joined = "_".join(_SPLIT_RE.split(raw)).strip("_")
        forms = [self._forms(t) for t in dict.fromkeys(terms)]  # repeated words count once
        scored: list[tuple[float, int, str]] = []
        for index, doc in enumerate(self._docs):
            score = sum(self._term_score(index, f) for f in forms)
            if raw in (doc.name, doc.id) or (joined and joined == doc.name):
                score += _EXACT_BONUS
            if score > 0:
                scored.append((-score, index, doc.key))
        scored.sort()
        return [key for _, _, key in scored]

    def _term_score(self, index: int, forms: list[tuple[float, frozenset[str], float]]) -> float:
        counts, norms = self._counts[index], self._norms[index]
        total = 0.0
        for weight, words, idf in forms:
            weighted_tf = 0.0
            for field, field_weight in FIELD_WEIGHTS.items():
                field_counts = counts[field]
                tf = sum(field_counts.get(w, 0) for w in words)
                if tf:
                    weighted_tf += field_weight * tf / norms[field]
            if weighted_tf:
                total += weight * idf * weighted_tf * (_K1 + 1) / (weighted_tf + _K1)
        return total


def _words(doc: SearchDoc) -> set[str]:
    return {w for words in doc.fields.values() for w in words}


def substring_rank(
    entries: Sequence[tuple[str, str, str, str | None, str]], query: str
) -> list[str]:
    """Plain substring-count ranking (the simple baseline), kept for the benchmark.

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
