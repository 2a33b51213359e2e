"""Pinned npm files: downloaded once, verified twice, stored atomically, read offline."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.assets import AssetError, PinnedFile, PinnedPackage, install_package, read_pinned
from tests.assets.registry import integrity_of, make_tarball, serve_registry

pytestmark = pytest.mark.integration

SCRIPT = b"window.demo = 1;\n"
TARBALL = make_tarball({"package/dist/demo.js": SCRIPT, "package/README.md": b"demo"})


def package(tarball: bytes = TARBALL, script_sha: str | None = None) -> PinnedPackage:
    return PinnedPackage(
        name="demo-lib",
        version="1.2.3",
        integrity=integrity_of(tarball),
        files=(
            PinnedFile(
                member="package/dist/demo.js",
                name="demo.js",
                sha256=script_sha or hashlib.sha256(SCRIPT).hexdigest(),
            ),
        ),
    )


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    monkeypatch.setenv("NODMIX_CACHE_DIR", str(tmp_path / "cache"))
    with serve_registry() as (url, served):
        monkeypatch.setenv("NODMIX_NPM_REGISTRY", url)
        yield served


PATH = "/demo-lib/-/demo-lib-1.2.3.tgz"


def test_install_downloads_verifies_and_then_reads_offline(registry: dict[str, bytes]) -> None:
    registry[PATH] = TARBALL
    pinned = package()
    assert install_package(pinned) is not None
    assert read_pinned(pinned, "demo.js") == SCRIPT
    assert pinned.directory().stat().st_mode & 0o777 == 0o700
    registry.clear()  # offline from now on: a verified copy needs no network
    assert install_package(pinned) is None
    assert read_pinned(pinned, "demo.js") == SCRIPT


def test_a_tampered_tarball_is_refused_and_nothing_is_written(
    registry: dict[str, bytes],
) -> None:
    registry[PATH] = make_tarball({"package/dist/demo.js": b"window.evil = 1;"})
    with pytest.raises(AssetError, match="integrity"):
        install_package(package())
    assert not (package().directory() / "demo.js").exists()


def test_a_file_that_does_not_match_its_pin_is_refused(registry: dict[str, bytes]) -> None:
    registry[PATH] = TARBALL
    with pytest.raises(AssetError, match="pinned sha256"):
        install_package(package(script_sha="0" * 64))


def test_a_link_in_place_of_the_file_is_refused(registry: dict[str, bytes]) -> None:
    tarball = make_tarball({}, symlink="package/dist/demo.js")
    registry[PATH] = tarball
    with pytest.raises(AssetError, match="not a regular file"):
        install_package(package(tarball))


def test_a_missing_tarball_names_the_url(registry: dict[str, bytes]) -> None:
    with pytest.raises(AssetError, match=r"demo-lib-1\.2\.3\.tgz failed: HTTP 404"):
        install_package(package())


def test_a_cached_file_altered_on_disk_is_not_served(registry: dict[str, bytes]) -> None:
    registry[PATH] = TARBALL
    pinned = package()
    install_package(pinned)
    (pinned.directory() / "demo.js").write_bytes(b"window.changed = 1;")
    assert read_pinned(pinned, "demo.js") is None
    assert install_package(pinned) is not None  # reinstalled from the registry
    assert read_pinned(pinned, "demo.js") == SCRIPT
