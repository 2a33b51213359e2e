"""Reading a `SKILL.md`: YAML front matter between `---` lines, then the Markdown body.

The format is the public Agent Skills one: `name` and `description` are required; Nodmix reads
its own requirements from `metadata.nodmix` (`requires.bins`, `requires.anyBins`, `requires.env`,
`requires.config`, `requires.tools`, `os`, `primaryEnv`). Anything else in the front matter is
left alone, so a skill written for another tool still loads.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from nodmix.skills.model import Requirements, Skill, SkillSource

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_SKILL_FILE_BYTES = 1024 * 1024
MAX_DESCRIPTION_CHARS = 1024
NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
_DELIMITER = "---"


class SkillFormatError(ValueError):
    """A `SKILL.md` that cannot be used; the message names what is wrong."""


def split_front_matter(text: str) -> tuple[str, str]:
    """`(front matter, body)` of a `SKILL.md` text.

    Raises:
        SkillFormatError: the text does not start with a closed `---` block.
    """
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != _DELIMITER:
        raise SkillFormatError("it does not start with a '---' front matter block")
    for index in range(1, len(lines)):
        if lines[index].strip() == _DELIMITER:
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise SkillFormatError("its front matter block has no closing '---' line")


def read_front_matter(path: Path) -> dict[str, Any]:
    """The parsed front matter of the `SKILL.md` at `path` (only its head is read).

    Raises:
        SkillFormatError: missing or malformed front matter.
        OSError: the file cannot be read.
    """
    head = _read_regular(path, MAX_FRONT_MATTER_BYTES)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        # The cut may have split a character; the front matter itself must be valid UTF-8.
        text = head.decode("utf-8", errors="ignore")
    front, _ = split_front_matter(text)
    import yaml  # here, not at start-up: cached front matter needs no YAML (`cache.py`)

    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
        raise SkillFormatError(f"its front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SkillFormatError("its front matter is not a YAML mapping")
    return data


def parse_skill(path: Path, source: SkillSource) -> Skill:
    """The skill described by the `SKILL.md` at `path`.

    Raises:
        SkillFormatError: the front matter is missing, malformed, or lacks a valid name or
            description.
        OSError: the file cannot be read.
    """
    data = read_front_matter(path)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillFormatError("'name' is missing from its front matter")
    name = name.strip()
    if not re.match(NAME_PATTERN, name):
        raise SkillFormatError(
            f"'name' {name!r} must be 1-64 lowercase letters, digits and inner hyphens"
        )
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("'description' is missing from its front matter")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(f"'description' is longer than {MAX_DESCRIPTION_CHARS} characters")
    own = _nodmix_metadata(data)
    requires = own.get("requires") or {}
    if not isinstance(requires, dict):
        raise SkillFormatError("'metadata.nodmix.requires' must be a mapping")
    primary = own.get("primaryEnv")
    if primary is not None and not isinstance(primary, str):
        raise SkillFormatError("'metadata.nodmix.primaryEnv' must be a string")
    return Skill(
        name=name,
        description=description,
        folder=path.parent.absolute(),
        source=source,
        requires=Requirements(
            bins=_strings(requires, "bins", "metadata.nodmix.requires.bins"),
            any_bins=_strings(requires, "anyBins", "metadata.nodmix.requires.anyBins"),
            env=_strings(requires, "env", "metadata.nodmix.requires.env"),
            config=_strings(requires, "config", "metadata.nodmix.requires.config"),
            os=_strings(own, "os", "metadata.nodmix.os"),
            tools=_strings(requires, "tools", "metadata.nodmix.requires.tools"),
        ),
        primary_env=primary,
    )


def _nodmix_metadata(data: dict[str, Any]) -> dict[str, Any]:
    metadata = data.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise SkillFormatError("'metadata' must be a mapping")
    own = metadata.get("nodmix")
    if own is None:
        return {}
    if not isinstance(own, dict):
        raise SkillFormatError("'metadata.nodmix' must be a mapping")
    return own


def _strings(section: dict[str, Any], key: str, label: str) -> tuple[str, ...]:
    value = section.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SkillFormatError(f"'{label}' must be a string or a list of strings")
    return tuple(v.strip() for v in value)


def read_body(path: Path) -> str:
    """The Markdown body of a `SKILL.md` (front matter removed).

    Raises:
        SkillFormatError: missing front matter.
        OSError: the file cannot be read.
    """
    data = _read_regular(path, MAX_SKILL_FILE_BYTES)
    _, body = split_front_matter(data.decode("utf-8", errors="replace"))
    return body.strip("\n")


def _read_regular(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes` of `path`, which must be a regular file: workspace skills may be
    written by sandboxed commands, and a FIFO would block the read, a device never end it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return handle.read(max_bytes)
