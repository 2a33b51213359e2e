"""Finding skills: folders with a `SKILL.md` under each location, later locations winning by name.

A scan runs before every turn, so it has to be cheap when nothing changed: each location's list
of folders is cached by the location's mtime, and each `SKILL.md` is parsed again only when its
mtime or size changed. Timestamps are coarse (a few milliseconds), so anything changed within
`SETTLE_NS` of a scan is not trusted from the cache yet and is looked at again next time (the
guard git uses against "racy" index entries). With a `FrontMatterCache`, settled verdicts
are also kept on disk, so a new process parses (and imports YAML for) only what changed since
any earlier one. A malformed `SKILL.md` is skipped and reported once (a warning naming the
file); it stays in `Discovery.problems` for `nodmix skills check`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from nodmix.skills.cache import FrontMatterCache
from nodmix.skills.frontmatter import SkillFormatError, parse_skill
from nodmix.skills.model import SKILL_FILE, Skill, SkillSource

log = logging.getLogger("nodmix.skills")

MAX_SKILLS_PER_LOCATION = 1000
"""Folders looked at per location; a stray huge directory cannot stall a turn."""

MAX_CACHED_SCANS = 64
"""Sets of locations (agents) whose latest result is kept."""

SETTLE_NS = 2_000_000_000
"""A folder or file modified this recently may change again within the same timestamp tick."""


class SkillLocation(msgspec.Struct, frozen=True):
    """A folder holding skill folders (or itself one skill folder)."""

    path: Path
    source: SkillSource


class Discovery(msgspec.Struct, frozen=True, kw_only=True):
    """What a scan found."""

    skills: dict[str, Skill]
    """By name, after overriding (later locations win)."""
    overridden: dict[str, tuple[Path, ...]]
    """Folders of skills that a later same-named one replaced, by name."""
    problems: tuple[str, ...]
    """One line per `SKILL.md` that could not be used."""


_Stamp = tuple[int, int]
_Parsed = Skill | str


class SkillScanner:
    """Scans skill locations, re-reading only what changed since the previous scan."""

    def __init__(
        self, warn: Callable[[str], None] | None = None, *, cache: FrontMatterCache | None = None
    ) -> None:
        """Create a scanner; `warn` receives a line for each newly broken `SKILL.md`;
        `cache` keeps parsed front matter for later processes."""
        self._warn = warn or log.warning
        self._cache = cache
        self._listings: dict[Path, tuple[int, tuple[Path, ...]]] = {}
        self._files: dict[Path, tuple[_Stamp | None, SkillSource, _Parsed]] = {}
        self._warned: dict[Path, _Stamp] = {}
        self._last: dict[tuple[SkillLocation, ...], tuple[tuple[object, ...], Discovery]] = {}
        """The latest result per set of locations (one per agent workspace)."""
        self._lock = threading.Lock()

    def scan(self, locations: Sequence[SkillLocation]) -> Discovery:
        """The skills under `locations` (in override order: later wins); thread-safe."""
        with self._lock:
            return self._scan(locations)

    def _scan(self, locations: Sequence[SkillLocation]) -> Discovery:
        now = time.time_ns()
        settled = True
        found: list[tuple[Path, SkillSource, _Stamp]] = []
        for location in locations:
            files, listing_settled = self._skill_files(location.path, now)
            settled = settled and listing_settled
            for skill_file in files:
                stamp = _stamp(skill_file)
                if stamp is not None:
                    found.append((skill_file, location.source, stamp))
                    settled = settled and _settled(stamp[0], now)
        signature = tuple(found)
        key = tuple(locations)
        last = self._last.get(key)
        if last is not None and last[0] == signature:
            return last[1]
        parsed: list[_Parsed] = []
        seen: set[Path] = set()
        for skill_file, source, stamp in found:
            seen.add(skill_file)
            cached = self._files.get(skill_file)
            if cached is not None and cached[0] == stamp and cached[1] == source:
                parsed.append(cached[2])
                continue
            trusted = stamp if _settled(stamp[0], now) else None
            result = self._cached(skill_file, trusted, source)
            if result is None:
                result = _parse(skill_file, source)
                if self._cache is not None and trusted is not None:
                    self._cache.put(skill_file, trusted, source, result)
            if isinstance(result, str) and self._warned.get(skill_file) != stamp:
                self._warned[skill_file] = stamp
                self._warn(result)
            self._files[skill_file] = (trusted, source, result)
            parsed.append(result)
        roots = {location.path for location in locations}
        covered = [p for p in self._files if _root_of(p) in roots or p.parent in roots]
        for stale in [p for p in covered if p not in seen]:
            del self._files[stale]  # gone from a location this scan covered
            self._warned.pop(stale, None)
        if self._cache is not None:
            self._cache.forget_missing(roots, seen)
            self._cache.save()
        discovery = _merge(parsed)
        if settled:
            if len(self._last) >= MAX_CACHED_SCANS:
                self._last.clear()
            self._last[key] = (signature, discovery)
        else:
            self._last.pop(key, None)
        return discovery

    def _cached(self, file: Path, stamp: _Stamp | None, source: SkillSource) -> _Parsed | None:
        if self._cache is None or stamp is None:
            return None
        return self._cache.get(file, stamp, source)

    def _skill_files(self, root: Path, now: int) -> tuple[list[Path], bool]:
        try:
            root_mtime = root.stat().st_mtime_ns
        except OSError:
            self._listings.pop(root, None)
            return [], True
        cached = self._listings.get(root)
        settled = _settled(root_mtime, now)
        if cached is None or cached[0] != root_mtime:
            cached = (root_mtime if settled else -1, _list_folders(root))
            self._listings[root] = cached
        files = [folder / SKILL_FILE for folder in cached[1]]
        own = root / SKILL_FILE
        return ([own] if own.is_file() else files), settled


def _list_folders(root: Path) -> tuple[Path, ...]:
    folders: list[Path] = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                folders.append(Path(entry.path))
                if len(folders) >= MAX_SKILLS_PER_LOCATION:
                    break
    except OSError:
        return ()
    return tuple(sorted(folders))


def _root_of(skill_file: Path) -> Path:
    """The location a `<location>/<folder>/SKILL.md` was found under."""
    return skill_file.parent.parent


def _settled(mtime_ns: int, now_ns: int) -> bool:
    return now_ns - mtime_ns > SETTLE_NS


def _stamp(path: Path) -> _Stamp | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def _parse(path: Path, source: SkillSource) -> _Parsed:
    try:
        return parse_skill(path, source)
    except SkillFormatError as exc:
        return f"skipped skill {path}: {exc}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"skipped skill {path}: cannot read it ({exc})"


def _merge(parsed: Sequence[_Parsed]) -> Discovery:
    skills: dict[str, Skill] = {}
    overridden: dict[str, list[Path]] = {}
    problems: list[str] = []
    for item in parsed:
        if isinstance(item, str):
            problems.append(item)
            continue
        previous = skills.get(item.name)
        if previous is not None:
            overridden.setdefault(item.name, []).append(previous.folder)
        skills[item.name] = item
    return Discovery(
        skills=dict(sorted(skills.items())),
        overridden={k: tuple(v) for k, v in overridden.items()},
        problems=tuple(problems),
    )
