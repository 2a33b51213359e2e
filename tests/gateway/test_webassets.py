"""The web page's Markdown renderer and sanitizer: pinned npm files served by the gateway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from nodmix.gateway import webassets
from tests.gateway.support import socket_gateway, write_config

pytestmark = pytest.mark.integration


def test_the_pins_match_the_registry_packages(tmp_path: Path) -> None:
    """A real install from the npm registry: every pinned file verifies (or the pin is stale)."""
    lines = webassets.install(root=tmp_path)
    assert [line.split(":")[0] for line in lines] == ["marked@18.2.1", "dompurify@3.4.18"]
    assert webassets.missing(tmp_path) == []
    script = (webassets.MARKED.directory(tmp_path) / "marked.umd.js").read_text(encoding="utf-8")
    assert "marked v18.2.1" in script


def test_the_gateway_serves_installed_scripts_and_404s_the_rest(
    isolated_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(isolated_state, "http://127.0.0.1:9/v1")
    with socket_gateway() as gateway:
        served = httpx2.get(f"{gateway.url}/static/vendor/purify.js", timeout=10)
        assert served.status_code == 200
        assert served.headers["content-type"].startswith("text/javascript")
        assert b"DOMPurify" in served.content
        assert httpx2.get(f"{gateway.url}/static/vendor/evil.js", timeout=10).status_code == 404
        icon = httpx2.get(f"{gateway.url}/favicon.ico", timeout=10)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


def test_web_status_names_the_fix_when_scripts_are_missing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nodmix", "web", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"NODMIX_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 1
    assert "marked@18.2.1: NOT INSTALLED" in done.stdout
    fix = next(line for line in done.stdout.splitlines() if line.startswith("fix: run `"))
    command = fix.split("`")[1]  # the command of this installation, ready to paste
    assert command.endswith(" web install") and Path(command.split()[0]).is_file()
