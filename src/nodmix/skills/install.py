"""`nodmix skills install|remove`: put a skill folder into `<state dir>/skills`, or take it out.

A skill comes from a folder or a `.zip` / `.tar.gz` / `.tgz` / `.tar` archive holding `SKILL.md`
at its top or in its single top-level folder. Nothing may land outside the destination: archive
members with absolute paths, `..` segments, links or device files are refused, symlinks in a
folder must stay inside it (they are copied as the files they point to), and the size and file
count are capped. Installed files are readable by the user only. The new folder is assembled
next to the destination and renamed into place, so a crash never leaves half a skill installed.
"""

from __future__ import annotations

import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from nodmix.assets.files import ensure_private_dir
from nodmix.errors import SkillError
from nodmix.skills.frontmatter import NAME_PATTERN, SkillFormatError, parse_skill
from nodmix.skills.model import SKILL_FILE, Skill

MAX_FILES = 2000
MAX_TOTAL_BYTES = 50 * 1024 * 1024
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")


def install_skill(source: Path, root: Path, *, force: bool = False) -> Skill:
    """Install the skill at `source` (folder, its `SKILL.md`, or archive) as `<root>/<name>`.

    Raises:
        SkillError: the source is missing, unsafe, too large, not a skill, or the skill is
            already installed and `force` is false.
    """
    if not source.exists():
        raise SkillError(f"{source} does not exist")
    if source.is_file() and source.name == SKILL_FILE:
        source = source.parent  # the skill's own SKILL.md stands for its folder
    ensure_private_dir(root)
    with tempfile.TemporaryDirectory(prefix=".install-", dir=root) as temp:
        staging = Path(temp) / "skill"
        if source.is_dir():
            _copy_folder(source, staging)
        elif source.name.lower().endswith(ARCHIVE_SUFFIXES):
            unpacked = Path(temp) / "unpacked"
            _extract(source, unpacked)
            _skill_folder(unpacked, source).rename(staging)
        else:
            raise SkillError(
                f"{source} is neither a folder nor a {', '.join(ARCHIVE_SUFFIXES)} archive"
            )
        try:
            skill = parse_skill(staging / SKILL_FILE, "managed")
        except FileNotFoundError:
            raise SkillError(f"{source} has no {SKILL_FILE}") from None
        except (SkillFormatError, OSError, UnicodeDecodeError) as exc:
            raise SkillError(f"{source}: {SKILL_FILE} cannot be used: {exc}") from None
        target = root / skill.name
        if target.exists() and not force:
            raise SkillError(
                f"skill {skill.name!r} is already installed at {target}; use --force to replace it"
            )
        if target.exists():
            target.rename(Path(temp) / "previous")  # removed with the temporary folder
        _owner_only(staging)
        staging.rename(target)
    return parse_skill(target / SKILL_FILE, "managed")


def remove_skill(name: str, root: Path) -> Path:
    """Delete the installed skill `<root>/<name>`; returns the folder removed.

    Raises:
        SkillError: `name` is not a valid skill name or no such skill is installed there.
    """
    if not re.match(NAME_PATTERN, name):
        raise SkillError(f"{name!r} is not a valid skill name")
    target = root / name
    if not (target / SKILL_FILE).is_file():
        raise SkillError(f"no skill {name!r} is installed in {root}")
    with tempfile.TemporaryDirectory(prefix=".remove-", dir=root) as temp:
        target.rename(Path(temp) / name)  # gone at once; the files are deleted after
    return target


def _owner_only(folder: Path) -> None:
    """Drop group and other permissions below `folder` (the user's own bits, such as a
    script's execute bit, stay), like everything else in the state dir."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & 0o700)


def _copy_folder(source: Path, staging: Path) -> None:
    base = source.resolve()
    files = 0
    total = 0
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if any(part in (".git", "__pycache__") for part in rel.parts):
            continue
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(base):
                raise SkillError(f"{path} is a symlink pointing outside the skill folder")
        if path.is_dir():
            continue
        if not path.is_file():
            raise SkillError(f"{path} is not a regular file")
        files += 1
        total += path.stat().st_size
        _check_bounds(files, total, source)
        dest = staging / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        shutil.copymode(path, dest)
    staging.mkdir(parents=True, exist_ok=True)


def _check_bounds(files: int, total: int, source: Path) -> None:
    if files > MAX_FILES:
        raise SkillError(f"{source} holds more than {MAX_FILES} files")
    if total > MAX_TOTAL_BYTES:
        raise SkillError(f"{source} holds more than {MAX_TOTAL_BYTES // (1024 * 1024)} MB")


def _safe_member(name: str, archive: Path) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise SkillError(f"{archive}: member {name!r} would land outside the skill folder")
    return path


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    try:
        if archive.name.lower().endswith(".zip"):
            _extract_zip(archive, dest)
        else:
            _extract_tar(archive, dest)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise SkillError(f"{archive} cannot be unpacked: {exc}") from None


def _extract_zip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as bundle:
        members = bundle.infolist()
        total = 0
        for index, info in enumerate(members, start=1):
            rel = _safe_member(info.filename, archive)
            mode = (info.external_attr >> 16) & 0o170000
            if mode == 0o120000:
                raise SkillError(f"{archive}: member {info.filename!r} is a symlink")
            total += info.file_size
            _check_bounds(index, total, archive)
            if info.is_dir():
                continue
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with bundle.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)


def _extract_tar(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as bundle:
        members: list[tarfile.TarInfo] = []
        total = 0
        # Headers are checked one by one as they are read, so a huge member stops the install
        # before its data is decompressed.
        for index, member in enumerate(bundle, start=1):
            _safe_member(member.name, archive)
            if member.issym() or member.islnk():
                raise SkillError(f"{archive}: member {member.name!r} is a link")
            if not (member.isfile() or member.isdir()):
                raise SkillError(f"{archive}: member {member.name!r} is not a regular file")
            total += member.size
            _check_bounds(index, total, archive)
            members.append(member)
        bundle.extractall(dest, members=members, filter="data")


def _skill_folder(unpacked: Path, archive: Path) -> Path:
    if (unpacked / SKILL_FILE).is_file():
        return unpacked
    children = [p for p in unpacked.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(children) == 1 and (children[0] / SKILL_FILE).is_file():
        return children[0]
    raise SkillError(f"{archive} has no {SKILL_FILE} at its top or in a single top-level folder")
