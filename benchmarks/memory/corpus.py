"""A generated memory of dated Markdown notes, with paraphrased questions about some of them.

Every note is a day's log: a heading and a few sentences of chores, some naming a topic or a
person. Target notes
each hold one fact (an action on a topic with a named person); its question names the same
person but says the topic with *other* words from the same concept (half the questions keep
one of the note's two topic words) (the synonym
groups of `nodmix.testing.embeddings`), e.g. the note says "dentist appointment with Ilsa
Varga" and the question asks about the "orthodontist checkup with Ilsa Varga". Each name
appears in many notes (about one note in 60 has the full name somewhere), so the name alone
rarely singles out the right note: keyword search has to get lucky, vectors can match the
meaning.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from nodmix.testing.embeddings import CONCEPTS

FIRST = (
    "Ilsa Omar Petra Joon Mirela Tomas Aiko Bruno Dalia Femi Greta Hugo Ines Kenji Lotte".split()
)
LAST = "Varga Osei Lindqvist Moreau Tanaka Novak Reyes Haddad Kowalski Brennan Sato Okafor".split()
FILLER = (
    "today later quickly finally again maybe probably noted checked called emailed planned "
    "moved cancelled confirmed asked answered waited wrote sent paid picked dropped updated "
    "reviewed tidied sorted started finished paused resumed kept lost found borrowed returned"
).split()
PAIRS = [
    ("dental", "appointment"),
    ("car", "repair"),
    ("travel", "money"),
    ("doctor", "appointment"),
    ("pet", "doctor"),
    ("home", "insurance"),
    ("music", "weekend"),
    ("sport", "morning"),
    ("tax", "deadline"),
    ("garden", "weekend"),
    ("computer", "password"),
    ("wedding", "money"),
    ("language", "evening"),
    ("book", "deadline"),
    ("food", "allergy"),
]


@dataclass(frozen=True)
class Question:
    text: str
    path: str
    """The note that answers it."""
    kind: str
    """`reworded` (shares one topic word with the note) or `paraphrased` (shares none)."""


def _words(concept: str, rng: random.Random, avoid: set[str] | None = None) -> str:
    choices = [w for w in CONCEPTS[concept] if not avoid or w not in avoid]
    return rng.choice(choices)


def _filler_sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(5, 9))]
    if rng.random() < 0.4:
        concept = rng.choice(list(CONCEPTS))
        words.insert(rng.randint(0, len(words)), _words(concept, rng))
    sentence = " ".join(words).capitalize()
    if rng.random() < 0.35:
        sentence += f" with {rng.choice(FIRST)} {rng.choice(LAST)}"
    return sentence + "."


def generate(
    root: Path, notes: int = 10_000, questions: int = 200, seed: int = 7
) -> list[Question]:
    """Write `notes` files under `root/memory/` (about 500 bytes each); return the questions."""
    rng = random.Random(seed)
    targets = set(rng.sample(range(notes), questions))
    asked: list[Question] = []
    for n in range(notes):
        year, day = 2020 + n // 2000, n % 2000
        rel = f"memory/{year}/{day // 100:02d}/{year}-{day:04d}.md"
        lines = [f"# {year}-{day:04d}", ""]
        body = [_filler_sentence(rng) for _ in range(rng.randint(7, 10))]
        if n in targets:
            a, b = rng.choice(PAIRS)
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            wa, wb = _words(a, rng), _words(b, rng)
            body.insert(rng.randint(0, len(body)), f"Sorted out the {wa} {wb} with {name}.")
            # Half the questions keep one of the note's words ("reworded"), half keep none
            # ("paraphrased").
            reworded = len(asked) % 2 == 0
            qa = wa if reworded else _words(a, rng, {wa})
            qb = _words(b, rng, {wb})
            asked.append(
                Question(
                    text=f"what about the {qa} {qb} with {name}?",
                    path=rel,
                    kind="reworded" if reworded else "paraphrased",
                )
            )
        lines.append("## Log")
        lines.extend(body)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return asked
