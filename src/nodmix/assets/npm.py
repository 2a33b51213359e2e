"""Fetch one pinned npm package, verify it twice, and keep chosen files in the cache.

`install_package()` downloads `<registry>/<name>/-/<name>-<version>.tgz` (streamed, size-capped,
with a timeout), checks the tarball's npm `dist.integrity` (sha512), extracts only the named
regular-file members (no links, no traversal), checks each file's sha256, and writes it
atomically under `<cache>/npm/<name>-<version>/`. `read_pinned()` never touches the network.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.errors import NodmixError

DEFAULT_REGISTRY: Final = "https://registry.npmjs.org"
_MAX_TARBALL_BYTES: Final = 16 << 20


class AssetError(NodmixError):
    """A pinned asset could not be downloaded, verified or stored."""


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """One file taken from a package tarball.

    Attributes:
        member: Path inside the tarball (`package/lib/x.js`).
        name: File name in the cache directory.
        sha256: Hex sha256 the extracted bytes must have.
        max_bytes: Refuse a member larger than this.
    """

    member: str
    name: str
    sha256: str
    max_bytes: int = 4 << 20


@dataclass(frozen=True, slots=True)
class PinnedPackage:
    """An npm package at an exact version, and the files Nodmix uses from it."""

    name: str
    version: str
    integrity: str
    """npm `dist.integrity` of the tarball (`sha512-<base64>`)."""
    files: tuple[PinnedFile, ...]

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def tarball_url(self, registry: str | None = None) -> str:
        """Tarball URL; `registry` (else `$NODMIX_NPM_REGISTRY`) replaces the npm base URL."""
        base = registry or os.environ.get("NODMIX_NPM_REGISTRY") or DEFAULT_REGISTRY
        short = self.name.rsplit("/", 1)[-1]
        return f"{base.rstrip('/')}/{self.name}/-/{short}-{self.version}.tgz"

    def directory(self, root: Path | None = None) -> Path:
        """Where this package's files live in the cache."""
        safe = self.name.replace("/", "__").lstrip("@")
        return (root or cache_root()) / "npm" / f"{safe}-{self.version}"

    def file(self, name: str) -> PinnedFile:
        for pinned in self.files:
            if pinned.name == name:
                return pinned
        raise KeyError(name)


def cache_root() -> Path:
    """`$NODMIX_CACHE_DIR` if set, else the platform's user cache directory for nodmix."""
    override = os.environ.get("NODMIX_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("nodmix"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify_integrity(data: bytes, integrity: str, label: str) -> None:
    """Check `data` against an npm `dist.integrity` string (sha512 only).

    Raises:
        AssetError: The digest does not match or the integrity string is not sha512.
    """
    algo, _, expected = integrity.partition("-")
    if algo != "sha512" or not expected:
        raise AssetError(f"unsupported integrity string {integrity!r} for {label}")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise AssetError(f"{label} failed its integrity check (sha512 mismatch)")


def extract_member(tarball: bytes, member: str, *, max_bytes: int) -> bytes:
    """Read one regular file out of a gzipped tarball without extracting anything to disk.

    Raises:
        AssetError: The member is missing, not a regular file, too large, or the tarball is bad.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
            info = tar.getmember(member)
            if not info.isreg():
                raise AssetError(f"{member} in the tarball is not a regular file")
            if info.size > max_bytes:
                raise AssetError(f"{member} in the tarball is too large ({info.size} bytes)")
            handle = tar.extractfile(info)
            if handle is None:
                raise AssetError(f"cannot read {member} from the tarball")
            return handle.read(max_bytes + 1)[:max_bytes]
    except KeyError:
        raise AssetError(f"{member} is missing from the tarball") from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise AssetError(f"cannot read the tarball: {exc}") from None


def download(
    url: str, *, timeout: float = 30.0, total: float = 300.0, max_bytes: int = _MAX_TARBALL_BYTES
) -> bytes:
    """Fetch `url` (streamed, size-capped, time-capped).

    Args:
        url: What to fetch.
        timeout: Seconds allowed for connecting and for each read.
        total: Seconds allowed for the whole download (a trickling server cannot hold it open).
        max_bytes: Refuse a larger response.

    Raises:
        AssetError: Network failure, HTTP error, an oversized or overlong response.
    """
    import httpx2

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + total
    try:
        with httpx2.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
            if response.status_code != 200:
                raise AssetError(f"download of {url} failed: HTTP {response.status_code}")
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise AssetError(f"download of {url} exceeded {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise AssetError(f"download of {url} took longer than {total:g} s")
                chunks.append(chunk)
    except httpx2.HTTPError as exc:
        raise AssetError(f"download of {url} failed: {exc}") from None
    return b"".join(chunks)


def _present(path: Path, pinned: PinnedFile) -> bool:
    try:
        return _sha256(path.read_bytes()) == pinned.sha256
    except OSError:
        return False


def install_package(
    package: PinnedPackage,
    *,
    root: Path | None = None,
    registry: str | None = None,
    force: bool = False,
    timeout: float = 30.0,
) -> str | None:
    """Make every pinned file of `package` present and verified; idempotent.

    Returns:
        The URL downloaded from, or None when verified copies were already cached.

    Raises:
        AssetError: Download, verification or writing failed.
    """
    try:
        directory = ensure_private_dir(package.directory(root))
    except OSError as exc:
        raise AssetError(f"cannot create {package.directory(root)}: {exc}") from None
    missing = [f for f in package.files if force or not _present(directory / f.name, f)]
    if not missing:
        return None
    url = package.tarball_url(registry)
    tarball = download(url, timeout=timeout)
    verify_integrity(tarball, package.integrity, package.label)
    for pinned in missing:
        data = extract_member(tarball, pinned.member, max_bytes=pinned.max_bytes)
        if _sha256(data) != pinned.sha256:
            raise AssetError(f"{pinned.member} of {package.label} does not match its pinned sha256")
        try:
            atomic_write(directory / pinned.name, data)
        except OSError as exc:
            raise AssetError(f"cannot write {directory / pinned.name}: {exc}") from None
    return url


def read_pinned(package: PinnedPackage, name: str, *, root: Path | None = None) -> bytes | None:
    """The verified bytes of one cached file, or None when it is absent or altered."""
    pinned = package.file(name)
    try:
        data = (package.directory(root) / name).read_bytes()
    except OSError:
        return None
    return data if _sha256(data) == pinned.sha256 else None
