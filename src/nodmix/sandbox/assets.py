"""The sandbox's runtime assets: `quickjs.wasm` from npm, installed and verified on demand.

No binary is committed to the repository. `install()` downloads the pinned npm tarball
`quickjs-wasi@3.6.2`, checks the tarball's npm `dist.integrity` (sha512) and the sha256 of the
extracted `quickjs.wasm`, writes the file atomically into a private cache directory and
precompiles it. Loading (`read_quickjs_wasm()`) never touches the network: a missing or
corrupt file raises `RuntimeUnavailableError`, so code mode fails closed.

Cache layout (`$NODMIX_CACHE_DIR`, else the platform user cache dir for "nodmix"):

```
<cache>/quickjs-wasi-3.6.2/quickjs.wasm   the runtime (sha256-verified on every load)
<cache>/quickjs-wasi-3.6.2/LICENSE        the package licence (MIT, Vercel)
<cache>/compiled/*.cwasm + *.json         serialized modules, see `modcache.py`
```
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from nodmix.assets import npm
from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.invocation import command

PACKAGE: Final = "quickjs-wasi"
VERSION: Final = "3.6.2"
DEFAULT_REGISTRY: Final = "https://registry.npmjs.org"
#: npm `dist.integrity` of the tarball.
TARBALL_INTEGRITY: Final = (
    "sha512-"
    "FCqGtGOrMgzUiIrMNMA2YnsOxCNwo31dzqXvclXUC6xeT35NJLKXQJsvbeCTjvoFAwZgEAPg8U6+KAPDGXn8Mg=="
)
WASM_SHA256: Final = "d4c9375f2b1ca4dc95f72c8aa2982a7a9951ac8011490d79c6582df732b4bbd9"
WASM_SIZE: Final = 637_405
WASM_MEMBER: Final = "package/quickjs.wasm"
LICENSE_MEMBER: Final = "package/LICENSE"
#: The OXC TypeScript transform shipped inside the `quickjs-rs` wheel (package data).
TRANSFORM_SHA256: Final = "c4710d5258585122a70f0b3ee3bc19d085742e6f94f48aa0b8057630ebaca745"

FIX_HINT: Final = f"run `{command('sandbox install')}`"
FORCE_HINT: Final = f"run `{command('sandbox install --force')}`"
_MAX_TARBALL_BYTES: Final = 16 << 20
_MAX_MEMBER_BYTES: Final = 4 << 20


def cache_root() -> Path:
    """`$NODMIX_CACHE_DIR` if set, else the platform's user cache directory for nodmix."""
    override = os.environ.get("NODMIX_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("nodmix"))


def runtime_dir(root: Path | None = None) -> Path:
    """Directory holding `quickjs.wasm` and its licence."""
    return (root or cache_root()) / f"{PACKAGE}-{VERSION}"


def compiled_dir(root: Path | None = None) -> Path:
    """Directory holding serialized (precompiled) modules."""
    return (root or cache_root()) / "compiled"


def quickjs_wasm_path(root: Path | None = None) -> Path:
    """Where `install()` puts `quickjs.wasm`."""
    return runtime_dir(root) / "quickjs.wasm"


def tarball_url(registry: str | None = None) -> str:
    """The tarball URL; `registry` (or `$NODMIX_NPM_REGISTRY`) replaces the npm base URL."""
    base = registry or os.environ.get("NODMIX_NPM_REGISTRY") or DEFAULT_REGISTRY
    return f"{base.rstrip('/')}/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def _sandbox_errors() -> Iterator[None]:
    """Asset failures while installing the runtime are sandbox errors to the caller."""
    try:
        yield
    except npm.AssetError as exc:
        raise SandboxError(str(exc)) from None


def verify_integrity(data: bytes, integrity: str = TARBALL_INTEGRITY) -> None:
    """Check `data` against an npm `dist.integrity` string (`sha512-<base64>`).

    Raises:
        SandboxError: The digest does not match or the integrity string is not sha512.
    """
    with _sandbox_errors():
        npm.verify_integrity(data, integrity, f"{PACKAGE}-{VERSION}.tgz")


def verify_wasm(data: bytes, expected_sha256: str = WASM_SHA256) -> None:
    """Check the extracted `quickjs.wasm` against its pinned sha256.

    Raises:
        SandboxError: The hash does not match.
    """
    actual = sha256_hex(data)
    if actual != expected_sha256:
        raise SandboxError(
            f"quickjs.wasm sha256 mismatch: expected {expected_sha256}, got {actual}"
        )


def extract_member(tarball: bytes, member: str, *, max_bytes: int = _MAX_MEMBER_BYTES) -> bytes:
    """Read one regular file out of a gzipped tarball without extracting anything to disk.

    Only the exact member name is accepted and it must be a regular file (no links, devices or
    directories), so path traversal and link tricks in a hostile tarball have no effect.

    Raises:
        SandboxError: The member is missing, not a regular file, too large, or the tarball is bad.
    """
    with _sandbox_errors():
        return npm.extract_member(tarball, member, max_bytes=max_bytes)


def download_tarball(url: str, *, timeout: float = 60.0, total: float = 300.0) -> bytes:
    """Fetch the tarball (streamed, size-capped, time-capped; see `nodmix.assets.npm.download`).

    Raises:
        SandboxError: Network failure, HTTP error, an oversized or overlong response.
    """
    with _sandbox_errors():
        return npm.download(url, timeout=timeout, total=total, max_bytes=_MAX_TARBALL_BYTES)


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What `install()` did.

    Attributes:
        wasm_path: Where `quickjs.wasm` is.
        downloaded: True if the tarball was fetched (False: a verified copy was already there).
        compiled: True if the module was compiled now (False: the compiled cache was reused).
        source: The tarball URL when downloaded, else None.
    """

    wasm_path: Path
    downloaded: bool
    compiled: bool
    source: str | None

    def summary(self) -> str:
        """One human-readable line."""
        if not self.downloaded and not self.compiled:
            return f"{PACKAGE}@{VERSION} already installed at {self.wasm_path}"
        parts = []
        if self.downloaded:
            parts.append(f"downloaded and verified {PACKAGE}@{VERSION} from {self.source}")
        parts.append("compiled the module" if self.compiled else "reused the compiled module")
        return f"{'; '.join(parts)}; runtime at {self.wasm_path}"


_VERIFIED: set[tuple[str, int, int, int]] = set()
"""Files already hashed and found good, by (path, inode, size, mtime): code mode checks the
runtime on every turn, and re-hashing an unchanged 637 KB file each time is wasted work."""


def _installed_ok(path: Path) -> bool:
    try:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:
            return True
        ok = st.st_size == WASM_SIZE and sha256_hex(path.read_bytes()) == WASM_SHA256
    except OSError:
        return False
    if ok:
        _VERIFIED.add(key)
    return ok


def install(
    *,
    root: Path | None = None,
    registry: str | None = None,
    force: bool = False,
    timeout: float = 60.0,
    total: float = 300.0,
) -> InstallReport:
    """Download, verify, store and precompile `quickjs.wasm` (idempotent).

    Args:
        root: Cache root (default `cache_root()`).
        registry: npm registry base URL (default `$NODMIX_NPM_REGISTRY` or registry.npmjs.org).
        force: Download again even if a verified copy is present.
        timeout: Seconds allowed for connecting and for each read of the download.
        total: Seconds allowed for the whole download.

    Raises:
        SandboxError: Download, verification or writing failed.
    """
    from nodmix.sandbox import modcache, wasm

    root = root or cache_root()
    directory = ensure_private_dir(runtime_dir(root))
    path = directory / "quickjs.wasm"
    url: str | None = None
    if force or not _installed_ok(path):
        url = tarball_url(registry)
        tarball = download_tarball(url, timeout=timeout, total=total)
        verify_integrity(tarball)
        data = extract_member(tarball, WASM_MEMBER)
        verify_wasm(data)
        license_text = extract_member(tarball, LICENSE_MEMBER, max_bytes=64 << 10)
        try:
            atomic_write(path, data)
            atomic_write(directory / "LICENSE", license_text)
        except OSError as exc:
            raise SandboxError(f"cannot write {path}: {exc}") from None
    data = read_quickjs_wasm(root)
    engine = wasm.shared_engine()
    cache = ensure_private_dir(compiled_dir(root))
    _, hit = modcache.load_compiled_module(
        engine, data, name="quickjs", wasm_sha256=WASM_SHA256, cache_dir=cache
    )
    return InstallReport(wasm_path=path, downloaded=url is not None, compiled=not hit, source=url)


def read_quickjs_wasm(root: Path | None = None) -> bytes:
    """The verified bytes of the installed `quickjs.wasm`; never downloads.

    Raises:
        RuntimeUnavailableError: The file is missing, unreadable or fails its sha256 check.
    """
    path = quickjs_wasm_path(root)
    return read_verified_file(path, WASM_SHA256)


def read_verified_file(path: Path, expected_sha256: str) -> bytes:
    """Read `path` and check its sha256; failures become `RuntimeUnavailableError` with the fix.

    Raises:
        RuntimeUnavailableError: The file is missing, unreadable or fails its sha256 check.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RuntimeUnavailableError(
            f"the QuickJS-WASI runtime is not installed ({path} is missing); {FIX_HINT}"
        ) from None
    except OSError as exc:
        raise RuntimeUnavailableError(
            f"the QuickJS-WASI runtime cannot be read ({exc}); {FIX_HINT}"
        ) from None
    if sha256_hex(data) != expected_sha256:
        raise RuntimeUnavailableError(
            f"the QuickJS-WASI runtime at {path} is corrupt (sha256 mismatch); {FORCE_HINT}"
        )
    return data


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Health of the sandbox runtime, for `nodmix sandbox status` and `nodmix doctor`.

    Attributes:
        installed: `quickjs.wasm` is present and passes its sha256 check (= usable).
        wasm_path: Where the runtime is expected.
        present: The file exists (it may still be corrupt).
        sha256_ok: The file's sha256 matches the pinned hash.
        compiled_cached: A precompiled module for this wasmtime/engine is cached.
        license_present: The package licence was copied next to the runtime.
        version: The pinned quickjs-wasi version.
        hint: One line: what to do, or "ok".
    """

    installed: bool
    wasm_path: Path
    present: bool
    sha256_ok: bool
    compiled_cached: bool
    license_present: bool
    version: str
    hint: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        data = asdict(self)
        data["wasm_path"] = str(self.wasm_path)
        return data


def status(root: Path | None = None) -> SandboxStatus:
    """Inspect the installed runtime without changing anything (and without network)."""
    from nodmix.sandbox import modcache

    root = root or cache_root()
    path = quickjs_wasm_path(root)
    present = path.is_file()
    sha_ok = present and _installed_ok(path)
    cwasm, meta = modcache.compiled_cache_paths(compiled_dir(root), "quickjs", WASM_SHA256)
    compiled = cwasm.is_file() and meta.is_file()
    if not present:
        hint = f"QuickJS-WASI runtime missing: {FIX_HINT}"
    elif not sha_ok:
        hint = f"QuickJS-WASI runtime corrupt: {FORCE_HINT}"
    elif not compiled:
        hint = f"runtime installed but not precompiled (first use compiles it): {FIX_HINT}"
    else:
        hint = "ok"
    return SandboxStatus(
        installed=sha_ok,
        wasm_path=path,
        present=present,
        sha256_ok=sha_ok,
        compiled_cached=compiled,
        license_present=(runtime_dir(root) / "LICENSE").is_file(),
        version=VERSION,
        hint=hint,
    )
