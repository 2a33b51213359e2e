"""`FrontMatterCache`: parsed `SKILL.md` front matter kept on disk between processes.

A new process (`nodmix agent --local`, a gateway restart) would otherwise import PyYAML and
parse every `SKILL.md` on its first turn. The cache holds each file's verdict (the skill, or
the line saying why it was skipped) keyed by path, mtime, size and source, so an unchanged
skill set costs a `stat` per file and no YAML at all. Only settled files are stored (see
`discovery.SETTLE_NS`). The file is written atomically (a temporary file, then a rename),
holds at most `MAX_ENTRIES` files, and is ignored and rebuilt when it is unreadable, corrupt
or of another version.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Final

import msgspec

from nodmix.skills.model import Skill, SkillSource

VERSION: Final = 1
"""Bump it whenever parsing changes what a verdict holds (a new requirement, another check):
a cache of another version is dropped, so no file keeps the old reading."""
MAX_ENTRIES: Final = 4_096
"""Files remembered at most (four full locations of `MAX_SKILLS_PER_LOCATION`)."""
MAX_CACHE_BYTES: Final = 8 * 1024 * 1024
CACHE_FILE: Final = "skills-front-matter.json"


def cache_path(state_dir: Path) -> Path:
    """`<state dir>/cache/skills-front-matter.json`."""
    return state_dir / "cache" / CACHE_FILE


class _Entry(msgspec.Struct, array_like=True, frozen=True):
    path: str
    mtime_ns: int
    size: int
    source: SkillSource
    skill: Skill | None
    problem: str | None


class _Document(msgspec.Struct, frozen=True):
    version: int
    entries: list[_Entry]


Stamp = tuple[int, int]
Verdict = Skill | str
"""A parsed skill, or the line saying why its `SKILL.md` was skipped."""


def _enc_hook(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise NotImplementedError(type(value).__name__)


def _dec_hook(kind: type, value: object) -> object:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(kind.__name__)


@functools.cache
def _decoder() -> msgspec.json.Decoder[_Document]:
    """Built on first use: a typed decoder costs imports a cached scan may not need."""
    return msgspec.json.Decoder(_Document, dec_hook=_dec_hook)


class FrontMatterCache:
    """Verdicts by `SKILL.md` path, loaded on first use and saved when they change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[Path, tuple[Stamp, SkillSource, Verdict]] | None = None
        self._dirty = False

    def get(self, file: Path, stamp: Stamp, source: SkillSource) -> Verdict | None:
        """The cached verdict of `file` if its stamp and source still match."""
        entry = self._load().get(file)
        if entry is None or entry[0] != stamp or entry[1] != source:
            return None
        return entry[2]

    def put(self, file: Path, stamp: Stamp, source: SkillSource, verdict: Verdict) -> None:
        """Remember a settled file's verdict (saved by `save`)."""
        entries = self._load()
        if entries.get(file) != (stamp, source, verdict):
            entries.pop(file, None)  # to the end: the newest are kept past `MAX_ENTRIES`
            entries[file] = (stamp, source, verdict)
            self._dirty = True

    def forget_missing(self, roots: set[Path], seen: set[Path]) -> None:
        """Drop files under the locations `roots` (`<root>/<folder>/SKILL.md`, or a location
        that is itself a skill) that a scan of them no longer found."""
        entries = self._load()
        gone = [
            file
            for file in entries
            if file not in seen and (file.parent.parent in roots or file.parent in roots)
        ]
        for file in gone:
            del entries[file]
        self._dirty = self._dirty or bool(gone)

    def save(self) -> None:
        """Write the cache if it changed (atomically; a failure only costs a re-parse)."""
        if not self._dirty or self._entries is None:
            return
        self._dirty = False
        items = list(self._entries.items())[-MAX_ENTRIES:]  # the newest puts win
        self._entries = dict(items)
        document = _Document(
            version=VERSION,
            entries=[
                _Entry(
                    path=str(file),
                    mtime_ns=stamp[0],
                    size=stamp[1],
                    source=source,
                    skill=verdict if isinstance(verdict, Skill) else None,
                    problem=verdict if isinstance(verdict, str) else None,
                )
                for file, (stamp, source, verdict) in items
            ],
        )
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{id(self)}.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(msgspec.json.encode(document, enc_hook=_enc_hook))
                os.replace(temporary, self.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            pass

    def _load(self) -> dict[Path, tuple[Stamp, SkillSource, Verdict]]:
        if self._entries is None:
            self._entries = _read(self.path)
        return self._entries


def _read(path: Path) -> dict[Path, tuple[Stamp, SkillSource, Verdict]]:
    """The cache file's entries; empty when it is missing, too large, corrupt or outdated."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return {}
    if len(data) > MAX_CACHE_BYTES:
        return {}
    try:
        document = _decoder().decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return {}
    if document.version != VERSION:
        return {}
    out: dict[Path, tuple[Stamp, SkillSource, Verdict]] = {}
    for entry in document.entries[-MAX_ENTRIES:]:
        verdict = entry.skill if entry.skill is not None else entry.problem
        if verdict is not None:
            out[Path(entry.path)] = ((entry.mtime_ns, entry.size), entry.source, verdict)
    return out
