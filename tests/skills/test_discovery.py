"""Discovery: locations in override order, broken files skipped once, changes picked up."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nodmix.skills.discovery import SETTLE_NS, SkillLocation, SkillScanner
from tests.skills.support import write_skill


def _age(path: Path, seconds: float = 10) -> None:
    """Backdate a file or folder so the scanner trusts its cached reading of it."""
    stamp = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(stamp, stamp))


def test_later_locations_override_earlier_ones_by_name(tmp_path: Path) -> None:
    bundled, workspace = tmp_path / "bundled", tmp_path / "ws"
    write_skill(bundled, "notes", "Bundled notes.")
    write_skill(bundled, "summary", "Bundled summary.")
    write_skill(workspace, "notes", "My own notes.", folder="my-notes")
    found = SkillScanner().scan(
        [SkillLocation(bundled, "bundled"), SkillLocation(workspace, "workspace")]
    )
    assert list(found.skills) == ["notes", "summary"]
    assert found.skills["notes"].description == "My own notes."
    assert found.skills["notes"].source == "workspace"
    assert found.overridden["notes"] == (bundled / "notes",)


def test_missing_locations_and_folders_without_skill_md_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "empty").mkdir(parents=True)
    (root / ".hidden").mkdir()
    write_skill(root / ".hidden", "ghost")
    found = SkillScanner().scan(
        [SkillLocation(tmp_path / "absent", "managed"), SkillLocation(root, "workspace")]
    )
    assert found.skills == {}
    assert found.problems == ()


def test_a_location_that_is_itself_a_skill_folder_counts(tmp_path: Path) -> None:
    write_skill(tmp_path, "solo")
    found = SkillScanner().scan([SkillLocation(tmp_path / "solo", "extra")])
    assert list(found.skills) == ["solo"]


def test_malformed_skill_is_skipped_with_one_warning_naming_the_file(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    bad = root / "bad" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text("---\nname: [bad\n---\n", encoding="utf-8")
    warnings: list[str] = []
    scanner = SkillScanner(warn=warnings.append)
    for _ in range(3):
        found = scanner.scan([SkillLocation(root, "workspace")])
        assert list(found.skills) == ["good"]
    assert len(warnings) == 1
    assert str(bad) in warnings[0]
    assert "not valid YAML" in warnings[0]
    assert found.problems == (warnings[0],)


def test_added_edited_and_removed_skills_are_picked_up_on_the_next_scan(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    first = write_skill(root, "alpha", "First version.")
    scanner = SkillScanner()
    location = [SkillLocation(root, "workspace")]
    assert scanner.scan(location).skills["alpha"].description == "First version."

    write_skill(root, "beta", "Brand new.")
    first.write_text("---\nname: alpha\ndescription: Second.\n---\n", encoding="utf-8")
    found = scanner.scan(location)
    assert sorted(found.skills) == ["alpha", "beta"]
    assert found.skills["alpha"].description == "Second."

    (root / "beta" / "SKILL.md").unlink()
    assert sorted(scanner.scan(location).skills) == ["alpha"]


def test_unchanged_settled_folders_return_the_cached_result(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for index in range(5):
        path = write_skill(root, f"skill-{index}")
        _age(path)
        _age(path.parent)
    _age(root)
    scanner = SkillScanner()
    location = [SkillLocation(root, "workspace")]
    first = scanner.scan(location)
    assert scanner.scan(location) is first


def test_a_same_size_edit_within_one_timestamp_tick_is_still_seen(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root, "tick", "Version A.")
    scanner = SkillScanner()
    location = [SkillLocation(root, "workspace")]
    assert scanner.scan(location).skills["tick"].description == "Version A."
    stat = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("A.", "B."), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime, same size
    assert time.time_ns() - stat.st_mtime_ns < SETTLE_NS
    assert scanner.scan(location).skills["tick"].description == "Version B."


def test_two_agents_scanning_in_turn_keep_each_others_cache(tmp_path: Path) -> None:
    shared, first, second = tmp_path / "shared", tmp_path / "a", tmp_path / "b"
    for root, name in ((shared, "common"), (first, "only-a"), (second, "only-b")):
        path = write_skill(root, name)
        for item in (path, path.parent, root):
            _age(item)
    scanner = SkillScanner()
    a = [SkillLocation(shared, "bundled"), SkillLocation(first, "workspace")]
    b = [SkillLocation(shared, "bundled"), SkillLocation(second, "workspace")]
    first_a, first_b = scanner.scan(a), scanner.scan(b)
    assert list(first_a.skills) == ["common", "only-a"]
    assert list(first_b.skills) == ["common", "only-b"]
    assert scanner.scan(a) is first_a
    assert scanner.scan(b) is first_b
