"""Installing and verifying the runtime assets; the `nodmix sandbox` commands."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.sandbox import QuickJSRuntime, assets
from tests.assets.registry import integrity_of, make_tarball

pytestmark = pytest.mark.integration


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NODMIX_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_loading_without_the_runtime_fails_closed_with_the_fix(empty_cache: Path) -> None:
    with pytest.raises(RuntimeUnavailableError, match=r"run `\S*nodmix sandbox install`"):
        QuickJSRuntime.load()


def test_loading_a_corrupted_runtime_fails_closed(empty_cache: Path) -> None:
    path = assets.quickjs_wasm_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0asm" + b"\0" * 100)
    with pytest.raises(RuntimeUnavailableError, match="corrupt.*install --force"):
        QuickJSRuntime.load()
    report = assets.status()
    assert report.present and not report.installed and not report.sha256_ok
    assert "--force" in report.hint


def test_an_explicit_wasm_path_is_verified_too(tmp_path: Path) -> None:
    bogus = tmp_path / "quickjs.wasm"
    bogus.write_bytes(b"not wasm")
    with pytest.raises(RuntimeUnavailableError):
        QuickJSRuntime.load(wasm_path=bogus, compile_cache=False)


def test_tarball_integrity_is_checked() -> None:
    data = make_tarball({"package/quickjs.wasm": b"wasm"})
    assets.verify_integrity(data, integrity_of(data))
    with pytest.raises(SandboxError, match="integrity"):
        assets.verify_integrity(data[:-1] + bytes([data[-1] ^ 1]), integrity_of(data))
    with pytest.raises(SandboxError):
        assets.verify_integrity(data, "sha1-abc")


def test_the_extracted_wasm_hash_is_checked() -> None:
    assets.verify_wasm(b"abc", hashlib.sha256(b"abc").hexdigest())
    with pytest.raises(SandboxError, match="sha256 mismatch"):
        assets.verify_wasm(b"abd", hashlib.sha256(b"abc").hexdigest())


def test_extraction_reads_only_the_named_regular_file() -> None:
    data = make_tarball(
        {"package/quickjs.wasm": b"good", "../../evil": b"x", "package/LICENSE": b"MIT"}
    )
    assert assets.extract_member(data, assets.WASM_MEMBER) == b"good"
    with pytest.raises(SandboxError, match="missing"):
        assets.extract_member(make_tarball({"package/other": b""}), assets.WASM_MEMBER)
    linked = make_tarball({}, symlink=assets.WASM_MEMBER)
    with pytest.raises(SandboxError, match="not a regular file"):
        assets.extract_member(linked, assets.WASM_MEMBER)
    with pytest.raises(SandboxError, match="too large"):
        assets.extract_member(data, assets.WASM_MEMBER, max_bytes=2)
    with pytest.raises(SandboxError):
        assets.extract_member(b"not a tarball", assets.WASM_MEMBER)


def test_install_refuses_a_tampered_tarball_and_writes_nothing(
    empty_cache: Path, fake_registry: dict[str, bytes]
) -> None:
    path = f"/{assets.PACKAGE}/-/{assets.PACKAGE}-{assets.VERSION}.tgz"
    fake_registry[path] = make_tarball({"package/quickjs.wasm": b"\0asm evil"})
    with pytest.raises(SandboxError, match="integrity"):
        assets.install()
    assert not assets.quickjs_wasm_path().exists()


def test_install_reports_an_unreachable_tarball(
    empty_cache: Path, fake_registry: dict[str, bytes]
) -> None:
    with pytest.raises(SandboxError, match="HTTP 404"):
        assets.install()


def test_a_real_install_downloads_verifies_and_precompiles(empty_cache: Path) -> None:
    report = assets.install()
    assert report.downloaded and report.compiled
    assert (assets.runtime_dir() / "LICENSE").read_text(encoding="utf-8").startswith("MIT")
    assert assets.runtime_dir().stat().st_mode & 0o777 == 0o700
    status = assets.status()
    assert status.installed and status.compiled_cached and status.hint == "ok"

    again = assets.install()
    assert not again.downloaded and not again.compiled
    assert "already installed" in again.summary()
    assert QuickJSRuntime.load().from_cache


def test_the_compiled_cache_only_loads_entries_it_wrote(tmp_path: Path) -> None:
    import wasmtime

    from nodmix.sandbox import modcache, wasm

    engine = wasm.shared_engine()
    module_bytes = wasmtime.wat2wasm('(module (func (export "f") (result i32) i32.const 7))')
    digest = hashlib.sha256(module_bytes).hexdigest()
    cache = tmp_path / "compiled"

    def load() -> bool:
        _, hit = modcache.load_compiled_module(
            engine, module_bytes, name="t", wasm_sha256=digest, cache_dir=cache
        )
        return hit

    assert load() is False
    assert cache.stat().st_mode & 0o777 == 0o700
    assert load() is True
    cwasm, meta = modcache.compiled_cache_paths(cache, "t", digest)
    cwasm.write_bytes(cwasm.read_bytes()[:-1] + b"X")  # tampered or torn: digest mismatch
    assert load() is False
    assert load() is True
    meta.unlink()  # no sidecar: not ours
    assert load() is False


def test_cli_status_reports_a_missing_runtime_as_json(
    empty_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "status", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["installed"] is False
    assert "nodmix sandbox install" in data["hint"]


def test_cli_install_is_idempotent_on_an_installed_machine(
    runtime: QuickJSRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "install"]) == 0
    assert "already installed" in capsys.readouterr().out
    assert main(["sandbox", "status"]) == 0
    assert "installed" in capsys.readouterr().out
