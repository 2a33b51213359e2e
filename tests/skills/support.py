"""Writing skill folders for tests."""

from __future__ import annotations

from pathlib import Path


def write_skill(
    root: Path,
    name: str,
    description: str = "Does a thing.",
    *,
    body: str = "Step one.\n",
    metadata: str = "",
    folder: str | None = None,
) -> Path:
    """Create `<root>/<folder or name>/SKILL.md`; returns the file."""
    path = root / (folder or name) / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\n{metadata}---\n\n{body}", encoding="utf-8"
    )
    return path
