"""The `nodmix.plugins` entry points of the installed distributions, kept between processes.

Finding them means reading the metadata of every installed distribution (~4 ms for 150 of
them), on every start of `nodmix agent --local` or the gateway. What was found is kept in
`<state dir>/cache/plugin-entry-points.json` with the path and mtime of each import path entry
(`sys.path`) it was found on. Installing, upgrading or removing a distribution adds or removes
its metadata folder in one of those directories and so changes the directory's mtime: a cache
whose stamps differ from the current ones is stale, and a fresh scan replaces it.

The file keeps the last `MAX_SCANS` scans, each for its own import path: `python -m nodmix`
(whose path starts with the current directory), the `nodmix` command and a service's
interpreter each find theirs instead of replacing one another's.

A scan is only stored when every stamped directory was last modified more than `SETTLE_NS`
ago, so a change made within the same timestamp tick as the scan cannot hide behind an equal
mtime. The file is written atomically, and is ignored (then rewritten) when it is missing,
unreadable, corrupt, too large or of another version.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from nodmix.assets.files import atomic_write

VERSION: Final = 1
CACHE_FILE: Final = "plugin-entry-points.json"
MAX_CACHE_BYTES: Final = 1024 * 1024
MAX_SCANS: Final = 8
"""Scans kept (one per import path seen most recently)."""
SETTLE_NS: Final = 2_000_000_000
"""A directory modified this recently may change again within the same timestamp tick."""
MISSING: Final = -1
"""The stamp of an import path entry that does not exist (it may appear later)."""


class FoundEntryPoint(msgspec.Struct, array_like=True, frozen=True):
    """One entry point of the group: its name, its `module:attribute` value, and the name of
    the distribution that declares it."""

    name: str
    value: str
    dist: str


Stamps = list[tuple[str, int]]


class _Scan(msgspec.Struct, frozen=True):
    paths: Stamps
    entry_points: list[FoundEntryPoint]


class _Document(msgspec.Struct, frozen=True):
    version: int
    scans: list[_Scan]


def cache_path(state_dir: Path) -> Path:
    """`<state dir>/cache/plugin-entry-points.json`."""
    return state_dir / "cache" / CACHE_FILE


def path_stamps(paths: Sequence[str]) -> Stamps:
    """Each import path entry as an absolute path, with its mtime (`MISSING` if absent)."""
    stamps = []
    for entry in paths:
        absolute = os.path.abspath(entry or ".")
        try:
            mtime = os.stat(absolute).st_mtime_ns
        except OSError:
            mtime = MISSING
        stamps.append((absolute, mtime))
    return stamps


def scan(group: str) -> list[FoundEntryPoint]:
    """The group's entry points of the distributions on `sys.path`, sorted by name."""
    from importlib.metadata import entry_points

    return [
        FoundEntryPoint(ep.name, ep.value, getattr(ep.dist, "name", None) or "?")
        for ep in sorted(entry_points(group=group), key=lambda e: e.name)
    ]


def cached_scan(group: str, cache: Path) -> list[FoundEntryPoint]:
    """`scan(group)`, answered from the cache file `cache` while `sys.path` is unchanged."""
    stamps = path_stamps(sys.path)
    scans = _read(cache)
    for kept in scans:
        if kept.paths == stamps:
            return kept.entry_points
    found = scan(group)
    if _settled(stamps, time.time_ns()):
        names = [path for path, _ in stamps]
        others = [kept for kept in scans if [path for path, _ in kept.paths] != names]
        _write(cache, [*others, _Scan(stamps, found)][-MAX_SCANS:])
    return found


def _settled(stamps: Stamps, now_ns: int) -> bool:
    return all(mtime == MISSING or now_ns - mtime > SETTLE_NS for _, mtime in stamps)


def _read(path: Path) -> list[_Scan]:
    """The stored scans; none when the file is missing, unreadable, too large, corrupt or of
    another version."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return []
    if len(data) > MAX_CACHE_BYTES:
        return []
    try:
        document = msgspec.json.decode(data, type=_Document)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []
    return document.scans if document.version == VERSION else []


def _write(path: Path, scans: list[_Scan]) -> None:
    """Store the scans; a failure (read-only state dir, full disk) only costs a later scan."""
    document = _Document(version=VERSION, scans=scans)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, msgspec.json.encode(document))
    except OSError:
        pass
