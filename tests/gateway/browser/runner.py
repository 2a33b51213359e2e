"""Runs a browser spec (`*.spec.mjs` beside this file) with node against a gateway.

Needs Debian's `chromium` (`scripts/ensure-chromium.sh`) and `playwright-core` in node_modules
(`npm ci`); `make test` provides both. Missing either is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway.support import TOKEN

ROOT = Path(__file__).resolve().parents[3]
SPECS = Path(__file__).parent


def requirements() -> tuple[str, str]:
    """The paths of node and chromium; fails the test naming what is missing."""
    node = shutil.which("node")
    chromium = shutil.which("chromium")
    if node is None:
        pytest.fail("node is not installed; the browser test needs Node.js")
    if chromium is None:
        pytest.fail("Debian chromium is missing: run scripts/ensure-chromium.sh (make browser)")
    if not (ROOT / "node_modules" / "playwright-core").is_dir():
        pytest.fail("node_modules/playwright-core is missing: run `npm ci` (make node)")
    return node, chromium


def run_spec(name: str, gateway_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `name.spec.mjs` against the gateway at `gateway_url`; `env` adds its inputs."""
    node, chromium = requirements()
    return subprocess.run(
        [node, str(SPECS / f"{name}.spec.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={
            **os.environ,
            "GATEWAY_URL": gateway_url,
            "GATEWAY_TOKEN": TOKEN,
            "CHROMIUM_PATH": chromium,
            **env,
        },
        check=False,
    )


def assert_steps_passed(done: subprocess.CompletedProcess[str], steps: int) -> None:
    """The spec exited 0 after exactly `steps` steps reported ok."""
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count(" ok\n") == steps, done.stdout
