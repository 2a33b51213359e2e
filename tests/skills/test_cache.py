"""The on-disk front matter cache: a new process reads unchanged skills without YAML; edits,
removals, a corrupt file and the size bound are handled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodmix.skills import cache as cache_module
from nodmix.skills.cache import FrontMatterCache, cache_path
from nodmix.skills.discovery import SkillLocation, SkillScanner
from tests.skills.support import write_skill

PROBE = """
import json, sys
from pathlib import Path
from nodmix.skills.cache import FrontMatterCache
from nodmix.skills.discovery import SkillLocation, SkillScanner
state, root = Path(sys.argv[1]), Path(sys.argv[2])
scanner = SkillScanner(cache=FrontMatterCache(state / "cache.json"), warn=lambda _: None)
found = scanner.scan([SkillLocation(root, "workspace")])
print(json.dumps({
    "skills": {n: s.description for n, s in found.skills.items()},
    "problems": len(found.problems),
    "yaml": "yaml" in sys.modules,
}))
"""


def _aged_skill(root: Path, name: str, description: str = "Does a thing.", **kw: str) -> Path:
    path = write_skill(root, name, description, **kw)
    stamp = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(stamp, stamp))
    return path


def _new_process(state: Path, root: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(state), str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_new_process_reads_an_unchanged_skill_set_without_importing_yaml(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    for index in range(3):
        _aged_skill(root, f"skill-{index}", f"Skill number {index}.")
    _aged_skill(root, "broken", metadata="metadata: [not, a, mapping]\n")
    first = _new_process(tmp_path, root)
    assert first["yaml"] is True
    assert (tmp_path / "cache.json").is_file()
    second = _new_process(tmp_path, root)
    assert second == {**first, "yaml": False}
    assert second["problems"] == 1  # a skipped file is remembered as skipped


def test_an_edited_added_or_removed_skill_is_seen_by_the_next_process(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    edited = _aged_skill(root, "edited", "Before.")
    removed = _aged_skill(root, "removed")
    _new_process(tmp_path, root)
    edited.write_text(edited.read_text().replace("Before.", "After, longer."))
    removed.unlink()
    removed.parent.rmdir()
    _aged_skill(root, "added")
    after = _new_process(tmp_path, root)
    assert after["skills"] == {"added": "Does a thing.", "edited": "After, longer."}
    assert after["yaml"] is True


def test_a_skill_written_moments_ago_is_not_cached_until_it_settles(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "fresh")
    path = tmp_path / "cache.json"
    SkillScanner(cache=FrontMatterCache(path)).scan([SkillLocation(root, "workspace")])
    assert not path.exists() or json.loads(path.read_text())["entries"] == []


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"version": 999, "entries": []}', b'["wrong", "shape"]', b"\x00" * 10],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_rebuilt(
    tmp_path: Path, content: bytes
) -> None:
    root = tmp_path / "skills"
    _aged_skill(root, "alpha", "The first.")
    path = tmp_path / "cache.json"
    path.write_bytes(content)
    scanner = SkillScanner(cache=FrontMatterCache(path))
    assert scanner.scan([SkillLocation(root, "workspace")]).skills["alpha"].description == (
        "The first."
    )
    again = FrontMatterCache(path)
    stat = (root / "alpha" / "SKILL.md").stat()
    cached = again.get(root / "alpha" / "SKILL.md", (stat.st_mtime_ns, stat.st_size), "workspace")
    assert cached is not None and not isinstance(cached, str) and cached.name == "alpha"


def test_the_cache_keeps_at_most_its_bound_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 3)
    root = tmp_path / "skills"
    for index in range(5):
        _aged_skill(root, f"skill-{index}")
    path = tmp_path / "cache.json"
    found = SkillScanner(cache=FrontMatterCache(path)).scan([SkillLocation(root, "workspace")])
    assert len(found.skills) == 5
    assert len(json.loads(path.read_text())["entries"]) == 3


def test_the_cache_lives_in_the_state_dir_and_is_private(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _aged_skill(root, "alpha")
    path = cache_path(tmp_path / "state")
    SkillScanner(cache=FrontMatterCache(path)).scan([SkillLocation(root, "workspace")])
    assert path.parent == tmp_path / "state" / "cache"
    assert path.stat().st_mode & 0o077 == 0
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
