"""Notes and indexes for memory tests."""

from __future__ import annotations

from pathlib import Path

from nodmix.config.schema import MemoryConfig, MemoryEmbeddingsConfig
from nodmix.memory.index import MemoryIndex
from nodmix.memory.service import open_index
from nodmix.memory.settings import resolve_memory_settings

NOTES = {
    "memory/2026-11-18.md": (
        "# 2026-11-18\n\n## Dentist\n"
        "Booked a dentist appointment for Thursday at 3pm with Dr. Reyes.\n"
        "Bring the insurance card.\n\n## Groceries\nOat milk, lentils, coffee beans.\n"
    ),
    "memory/2026-11-19.md": (
        "# 2026-11-19\n\n## Car\n"
        "The mechanic said the brake pads need replacing before winter; quote 240 euros.\n"
    ),
    "memory/2026-11-20.md": (
        "# 2026-11-20\n\n## Trip\nFlight to Lisbon leaves Friday 7:40 from terminal 2.\n"
    ),
    "MEMORY.md": "# About the user\nPrefers tea over coffee. Allergic to peanuts.\n",
}


def write_notes(workspace: Path, notes: dict[str, str] = NOTES) -> None:
    for rel, text in notes.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def make_index(
    state: Path,
    workspace: Path,
    *,
    embeddings_url: str | None = None,
    sessions: bool = False,
    **options: float,
) -> MemoryIndex:
    embeddings = (
        MemoryEmbeddingsConfig(base_url=embeddings_url, model="scripted-embeddings")
        if embeddings_url
        else None
    )
    settings = resolve_memory_settings(MemoryConfig(embeddings=embeddings, sessions=sessions))
    index = open_index(settings, state_dir=state, agent_id="main", workspace=workspace)
    for name, value in options.items():
        setattr(index, name, value)
    return index
