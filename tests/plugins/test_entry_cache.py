"""The installed plugin entry points, kept between processes in the state dir's cache."""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pytest

from nodmix.config.schema import PluginsConfig
from nodmix.plugins import ENTRY_POINT_GROUP, PluginRegistry, load_plugins
from nodmix.plugins.entry_cache import (
    FoundEntryPoint,
    cache_path,
    cached_scan,
    path_stamps,
)

PLUGIN_MODULE = """
from nodmix.plugins import Plugin

plugin = Plugin(id="{plugin_id}", name="Demo", register=lambda api: None)
"""


class Site:
    """A site-packages directory that is the whole import path, and installs into it."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        root.mkdir()
        monkeypatch.setattr(sys, "path", [str(root)])
        self.age_step = 0

    def install(self, dist: str, entry_point: str) -> str:
        """Install distribution `dist` whose module provides plugin `entry_point`; returns
        the module name."""
        module = f"nodmix_demo_{uuid.uuid4().hex[:10]}"
        (self.root / f"{module}.py").write_text(
            PLUGIN_MODULE.format(plugin_id=entry_point), encoding="utf-8"
        )
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[{ENTRY_POINT_GROUP}]\n{entry_point} = {module}:plugin\n", encoding="utf-8"
        )
        return module

    def remove(self, dist: str) -> None:
        shutil.rmtree(self.root / f"{dist.replace('-', '_')}-1.0.dist-info")

    def settle(self) -> None:
        """Let the directory's last change lie in the past (each time a different past, as
        after real time passing)."""
        self.age_step += 1
        past = time.time_ns() - (600 - self.age_step) * 1_000_000_000
        os.utime(self.root, ns=(past, past))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    return Site(tmp_path / "site-packages", monkeypatch)


def _names(found: list[FoundEntryPoint]) -> list[str]:
    return [row.name for row in found]


def test_a_distribution_installed_after_the_scan_is_found(site: Site, tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "state")
    site.settle()
    assert cached_scan(ENTRY_POINT_GROUP, cache) == []
    assert cache.is_file()

    site.install("demo-plugin", "demo")

    assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]


def test_a_removed_distribution_is_no_longer_offered(site: Site, tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "state")
    site.install("demo-plugin", "demo")
    site.settle()
    assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]
    assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]  # from the file

    site.remove("demo-plugin")

    assert cached_scan(ENTRY_POINT_GROUP, cache) == []


def test_an_unchanged_import_path_is_answered_from_the_cache(site: Site, tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "state")
    site.settle()
    cached_scan(ENTRY_POINT_GROUP, cache)
    # The file is the answer while the stamps match: one naming an entry point that no
    # installed distribution has is believed.
    stamps = path_stamps(sys.path)
    remembered = [["remembered", "somewhere:plugin", "gone-dist"]]
    document = {"version": 1, "scans": [{"paths": stamps, "entry_points": remembered}]}
    cache.write_bytes(msgspec.json.encode(document))

    assert cached_scan(ENTRY_POINT_GROUP, cache) == [
        FoundEntryPoint("remembered", "somewhere:plugin", "gone-dist")
    ]


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b'{"version": 1}', b'{"version": 99, "scans": []}'],
    ids=["empty", "not-json", "incomplete", "other-version"],
)
def test_a_corrupt_or_outdated_cache_is_ignored_and_rewritten(
    site: Site, tmp_path: Path, content: bytes
) -> None:
    cache = cache_path(tmp_path / "state")
    site.install("demo-plugin", "demo")
    site.settle()
    cache.parent.mkdir(parents=True)
    cache.write_bytes(content)

    assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]
    rewritten = msgspec.json.decode(cache.read_bytes())
    assert rewritten["scans"][0]["entry_points"][0][:1] == ["demo"]


def test_the_cache_is_replaced_by_a_rename_not_rewritten_in_place(
    site: Site, tmp_path: Path
) -> None:
    cache = cache_path(tmp_path / "state")
    site.settle()
    cached_scan(ENTRY_POINT_GROUP, cache)
    first = cache.read_bytes()
    with cache.open("rb") as reader:  # a reader holding the old file
        site.install("demo-plugin", "demo")
        site.settle()
        assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]
        assert os.stat(cache).st_ino != os.fstat(reader.fileno()).st_ino
        assert reader.read() == first  # still the old, complete file
    assert b"demo" in cache.read_bytes()
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name]  # no temporaries


def test_a_scan_of_a_directory_changed_just_now_is_not_stored(site: Site, tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "state")
    site.install("demo-plugin", "demo")  # the directory's mtime is now

    assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]
    assert not cache.exists()


def test_an_unwritable_cache_location_still_finds_the_plugins(site: Site, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)  # the test state dir may exist already
    (state / "cache").write_text("a file where the cache folder belongs", encoding="utf-8")
    site.install("demo-plugin", "demo")
    site.settle()

    assert _names(cached_scan(ENTRY_POINT_GROUP, cache_path(state))) == ["demo"]


def test_plugins_load_the_same_from_a_scan_and_from_the_cache(site: Site, tmp_path: Path) -> None:
    state = tmp_path / "state"
    site.install("demo-plugin", "demo")
    site.settle()
    runs = []
    for _ in range(2):  # the first scans and stores, the second reads the cache
        registry = PluginRegistry()
        runs.append(load_plugins(PluginsConfig(), registry, state_dir=state))
        assert "demo" in registry.statuses
    assert cache_path(state).is_file()
    assert runs[0] == runs[1]
    (status,) = runs[1]
    assert status.loaded
    assert status.source == "entry point demo (demo-plugin)"


def test_each_import_path_keeps_its_own_scan(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m nodmix` (the current directory first) and the `nodmix` command alternate
    without rescanning each time."""
    cache = cache_path(tmp_path / "state")
    site.install("demo-plugin", "demo")
    site.settle()
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    past = time.time_ns() - 300 * 1_000_000_000
    os.utime(elsewhere, ns=(past, past))
    command_path = list(sys.path)
    module_path = [str(elsewhere), *command_path]
    for path in (command_path, module_path):
        monkeypatch.setattr(sys, "path", path)
        assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]

    stored = msgspec.json.decode(cache.read_bytes())["scans"]
    assert [[p for p, _ in kept["paths"]] for kept in stored] == [command_path, module_path]
    for path in (command_path, module_path):  # both answered from the file, which stays
        monkeypatch.setattr(sys, "path", path)
        before = os.stat(cache).st_ino
        assert _names(cached_scan(ENTRY_POINT_GROUP, cache)) == ["demo"]
        assert os.stat(cache).st_ino == before


def test_a_changed_import_path_replaces_its_old_scan(site: Site, tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "state")
    site.settle()
    cached_scan(ENTRY_POINT_GROUP, cache)
    site.install("demo-plugin", "demo")
    site.settle()
    cached_scan(ENTRY_POINT_GROUP, cache)

    (stored,) = msgspec.json.decode(cache.read_bytes())["scans"]
    assert [row[0] for row in stored["entry_points"]] == ["demo"]
