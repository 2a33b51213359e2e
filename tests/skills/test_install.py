"""Installing skills from folders and archives without letting anything land outside."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from nodmix.errors import SkillError
from nodmix.skills.install import install_skill, remove_skill
from tests.skills.support import write_skill


def _source(tmp_path: Path, name: str = "hello") -> Path:
    path = write_skill(tmp_path / "src", name, "Say hello.")
    script = path.parent / "scripts" / "run.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    script.chmod(0o755)
    return path.parent


def test_install_from_a_folder_copies_scripts_and_keeps_modes(tmp_path: Path) -> None:
    root = tmp_path / "managed"
    skill = install_skill(_source(tmp_path), root)
    assert skill.name == "hello"
    assert skill.source == "managed"
    script = root / "hello" / "scripts" / "run.sh"
    assert script.read_text(encoding="utf-8") == "#!/bin/sh\necho hi\n"
    assert script.stat().st_mode & stat.S_IXUSR
    assert sorted(p.name for p in root.iterdir()) == ["hello"]  # no staging left behind


def test_installed_skills_are_readable_by_the_user_only_whatever_the_source_modes(
    tmp_path: Path,
) -> None:
    source = _source(tmp_path)
    (source / "SKILL.md").chmod(0o644)
    previous = os.umask(0o022)
    try:
        install_skill(source, tmp_path / "state" / "skills")
    finally:
        os.umask(previous)
    installed = tmp_path / "state" / "skills"
    modes = {
        p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode)
        for p in [installed, *installed.rglob("*")]
    }
    assert modes == {
        "state/skills": 0o700,
        "state/skills/hello": 0o700,
        "state/skills/hello/SKILL.md": 0o600,
        "state/skills/hello/scripts": 0o700,
        "state/skills/hello/scripts/run.sh": 0o700,
    }


def test_installing_a_skill_md_file_installs_its_whole_folder(tmp_path: Path) -> None:
    root = tmp_path / "managed"
    skill = install_skill(_source(tmp_path) / "SKILL.md", root)
    assert skill.name == "hello"
    assert (root / "hello" / "scripts" / "run.sh").is_file()


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_install_from_an_archive_with_a_top_level_folder(tmp_path: Path, suffix: str) -> None:
    folder = _source(tmp_path)
    archive = tmp_path / f"hello{suffix}"
    if suffix == ".zip":
        with zipfile.ZipFile(archive, "w") as bundle:
            for path in folder.rglob("*"):
                bundle.write(path, Path("hello") / path.relative_to(folder))
    else:
        with tarfile.open(archive, "w:gz") as bundle:
            bundle.add(folder, arcname="hello")
    skill = install_skill(archive, tmp_path / "managed")
    assert (skill.folder / "scripts" / "run.sh").is_file()


def test_existing_skill_needs_force_and_force_replaces_it(tmp_path: Path) -> None:
    root = tmp_path / "managed"
    install_skill(_source(tmp_path), root)
    (root / "hello" / "stale.txt").write_text("old", encoding="utf-8")
    with pytest.raises(SkillError, match="already installed.*--force"):
        install_skill(_source(tmp_path), root)
    install_skill(_source(tmp_path), root, force=True)
    assert not (root / "hello" / "stale.txt").exists()
    assert sorted(p.name for p in root.iterdir()) == ["hello"]


def _zip_with(tmp_path: Path, name: str, *, symlink: bool = False) -> Path:
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("SKILL.md", "---\nname: bad\ndescription: d\n---\n")
        info = zipfile.ZipInfo(name)
        if symlink:
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        bundle.writestr(info, "/etc/passwd" if symlink else "x")
    return archive


@pytest.mark.parametrize(
    ("member", "symlink", "problem"),
    [
        ("../escape.txt", False, "would land outside"),
        ("/abs.txt", False, "would land outside"),
        ("link", True, "is a symlink"),
    ],
)
def test_unsafe_zip_members_are_refused(
    tmp_path: Path, member: str, symlink: bool, problem: str
) -> None:
    root = tmp_path / "managed"
    with pytest.raises(SkillError, match=problem):
        install_skill(_zip_with(tmp_path, member, symlink=symlink), root)
    assert not (tmp_path / "escape.txt").exists()
    assert list(root.iterdir()) == []


def test_tar_links_and_traversal_are_refused(tmp_path: Path) -> None:
    for kind in ("symlink", "traversal"):
        archive = tmp_path / f"{kind}.tar.gz"
        with tarfile.open(archive, "w:gz") as bundle:
            body = b"---\nname: bad\ndescription: d\n---\n"
            info = tarfile.TarInfo("SKILL.md")
            info.size = len(body)
            bundle.addfile(info, io.BytesIO(body))
            if kind == "symlink":
                link = tarfile.TarInfo("secrets")
                link.type = tarfile.SYMTYPE
                link.linkname = "/etc"
                bundle.addfile(link)
            else:
                info = tarfile.TarInfo("../../out.txt")
                info.size = 1
                bundle.addfile(info, io.BytesIO(b"x"))
        with pytest.raises(SkillError, match="is a link|would land outside"):
            install_skill(archive, tmp_path / "managed")
    assert not (tmp_path / "out.txt").exists()


def test_folder_symlink_pointing_outside_is_refused(tmp_path: Path) -> None:
    folder = _source(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("secret", encoding="utf-8")
    os.symlink(outside, folder / "leak.txt")
    with pytest.raises(SkillError, match="symlink pointing outside"):
        install_skill(folder, tmp_path / "managed")


def test_source_without_skill_md_or_of_unknown_kind_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SkillError, match="has no SKILL.md"):
        install_skill(empty, tmp_path / "managed")
    other = tmp_path / "skill.rar"
    other.write_bytes(b"x")
    with pytest.raises(SkillError, match="neither a folder nor"):
        install_skill(other, tmp_path / "managed")


def test_remove_deletes_only_an_installed_skill(tmp_path: Path) -> None:
    root = tmp_path / "managed"
    install_skill(_source(tmp_path), root)
    assert remove_skill("hello", root) == root / "hello"
    assert list(root.iterdir()) == []
    with pytest.raises(SkillError, match="no skill 'hello' is installed"):
        remove_skill("hello", root)
    with pytest.raises(SkillError, match="not a valid skill name"):
        remove_skill("../src", root)


def test_archives_over_the_size_cap_are_refused_before_unpacking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodmix.skills import install

    monkeypatch.setattr(install, "MAX_TOTAL_BYTES", 1024)
    archive = tmp_path / "big.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        for name, size in (("SKILL.md", 40), ("data.bin", 4096)):
            info = tarfile.TarInfo(name)
            info.size = size
            bundle.addfile(info, io.BytesIO(b"x" * size))
    with pytest.raises(SkillError, match="holds more than"):
        install_skill(archive, tmp_path / "managed")
    assert list((tmp_path / "managed").iterdir()) == []
