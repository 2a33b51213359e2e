"""Deterministic embeddings for tests and demos: a test double, not a language model.

`embed(text)` maps each word to a *concept* through a small built-in synonym table (so
"dentist", "dental" and "teeth" are one concept, and "appointment", "visit" and "checkup"
another), hashes concepts and the remaining words into a fixed number of dimensions, and
returns the L2-normalised sum. Two texts that share concepts point the same way even when
they share no word, which is enough for tests of hybrid memory search to need no paid key.
Words not in the table only match themselves. The scripted model server serves these vectors
at `POST /v1/embeddings`.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Final

DIMENSIONS: Final = 256

CONCEPTS: Final[dict[str, tuple[str, ...]]] = {
    "dental": ("dentist", "dental", "teeth", "tooth", "orthodontist", "hygienist", "cavity"),
    "appointment": ("appointment", "visit", "checkup", "booking", "booked", "reservation"),
    "car": ("car", "vehicle", "automobile", "auto", "sedan", "truck"),
    "repair": ("repair", "fix", "fixed", "mechanic", "garage", "service", "serviced"),
    "travel": ("flight", "flights", "plane", "airline", "airport", "fly", "flying", "trip"),
    "money": ("money", "budget", "cost", "price", "expense", "expenses", "spend", "dollars"),
    "food": ("food", "meal", "dinner", "lunch", "eat", "restaurant", "cuisine", "dish"),
    "allergy": ("allergy", "allergic", "allergies", "intolerance", "intolerant"),
    "nut": ("peanut", "peanuts", "nut", "nuts", "almond", "cashew", "walnut"),
    "family": ("mother", "mom", "father", "dad", "parents", "sister", "brother", "sibling"),
    "birthday": ("birthday", "born", "anniversary", "celebration"),
    "home": ("home", "house", "apartment", "flat", "rent", "landlord", "lease"),
    "doctor": ("doctor", "physician", "gp", "clinic", "medical", "prescription"),
    "pet": ("dog", "puppy", "cat", "kitten", "pet", "vet", "veterinarian"),
    "work": ("job", "work", "office", "employer", "colleague", "boss", "manager"),
    "deadline": ("deadline", "due", "submit", "submission", "cutoff"),
    "music": ("guitar", "piano", "music", "song", "concert", "band", "lesson", "lessons"),
    "sport": ("run", "running", "marathon", "jog", "race", "gym", "workout", "exercise"),
    "weekday": ("monday", "tuesday", "wednesday", "thursday", "friday", "weekday"),
    "weekend": ("saturday", "sunday", "weekend"),
    "morning": ("morning", "dawn", "early", "am", "breakfast"),
    "evening": ("evening", "night", "pm", "late", "tonight"),
    "password": ("password", "passphrase", "credentials", "login", "secret"),
    "computer": ("laptop", "computer", "pc", "notebook", "desktop", "macbook"),
    "book": ("book", "novel", "reading", "read", "author", "library"),
    "garden": ("garden", "plants", "tomatoes", "vegetables", "soil", "seeds", "grow"),
    "insurance": ("insurance", "policy", "premium", "coverage", "insurer"),
    "tax": ("tax", "taxes", "irs", "return", "filing", "accountant"),
    "wedding": ("wedding", "marriage", "bride", "groom", "married"),
    "language": ("spanish", "french", "german", "language", "vocabulary", "fluent"),
}

_WORD = re.compile(r"[a-z0-9]+")
_CONCEPT_OF: Final = {word: concept for concept, words in CONCEPTS.items() for word in words}
_STOP: Final = frozenset(
    "a an the and or of to in on at for with is are was were be my me i you your it this that "
    "when what where which who how do does did have has had will should can".split()
)


def _bucket(token: str) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    index = int.from_bytes(digest[:4], "little") % DIMENSIONS
    sign = 1.0 if digest[4] & 1 else -1.0
    return index, sign


def embed(text: str) -> list[float]:
    """A unit vector for a text (all zeros for a text without words)."""
    vector = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        concept = _CONCEPT_OF.get(word) or _CONCEPT_OF.get(word.rstrip("s"))
        # A concept counts more than a lone word: it is what paraphrases share.
        token, weight = (f"concept:{concept}", 2.0) if concept else (f"word:{word}", 1.0)
        index, sign = _bucket(token)
        vector[index] += sign * weight
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector
