"""Code mode's first use fetches the runtime itself; failures fail closed with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import RuntimeUnavailableError
from nodmix.sandbox import assets
from nodmix.sandbox.firstuse import ensure_installed
from tests.assets.registry import make_tarball

pytestmark = pytest.mark.integration

TARBALL_PATH = f"/{assets.PACKAGE}/-/{assets.PACKAGE}-{assets.VERSION}.tgz"


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NODMIX_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_first_use_with_a_tampered_tarball_fails_closed_with_the_fix(
    empty_cache: Path, fake_registry: dict[str, bytes]
) -> None:
    fake_registry[TARBALL_PATH] = make_tarball({"package/quickjs.wasm": b"\0asm evil"})
    said: list[str] = []
    with pytest.raises(RuntimeUnavailableError) as caught:
        ensure_installed(said.append)
    message = str(caught.value)
    assert "integrity" in message and "nodmix sandbox install" in message
    assert "\n" not in message
    assert len(said) == 1 and "first use" in said[0] and TARBALL_PATH in said[0]
    assert not assets.quickjs_wasm_path().exists()


def test_first_use_offline_fails_closed_with_the_fix(
    empty_cache: Path, fake_registry: dict[str, bytes]
) -> None:
    with pytest.raises(RuntimeUnavailableError, match=r"HTTP 404.*nodmix sandbox install"):
        ensure_installed()
    assert not assets.status().installed


def test_a_corrupt_runtime_is_not_replaced_silently(
    empty_cache: Path, fake_registry: dict[str, bytes]
) -> None:
    path = assets.quickjs_wasm_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0asm corrupt")
    said: list[str] = []
    with pytest.raises(RuntimeUnavailableError, match="--force"):
        ensure_installed(said.append)
    assert said == []  # nothing was fetched
    assert path.read_bytes() == b"\0asm corrupt"


def test_an_installed_runtime_is_used_as_is(runtime: object) -> None:
    said: list[str] = []
    assert ensure_installed(said.append) is False
    assert said == []


def test_first_use_downloads_verifies_and_precompiles_the_runtime(empty_cache: Path) -> None:
    said: list[str] = []
    assert ensure_installed(said.append) is True
    assert len(said) == 1
    status = assets.status()
    assert status.installed and status.compiled_cached
    assert ensure_installed(said.append) is False and len(said) == 1
