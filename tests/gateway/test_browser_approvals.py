"""The web page's approval buttons in real headless Chromium: Allow once runs the command,
Deny refuses it (the model reads why), and pending requests survive a page reload.

Needs Debian's `chromium` and `playwright-core` in node_modules, like `test_browser.py`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, socket_gateway, write_config
from tests.gateway.test_browser import ROOT, _requirements
from tests.security.support import exec_policy, shell_model

pytestmark = [pytest.mark.browser, pytest.mark.integration]

SPEC = Path(__file__).parent / "browser" / "approvals.spec.mjs"


def test_approve_and_deny_buttons_answer_exec_approvals_in_chromium(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    node, chromium = _requirements()
    write_config(isolated_state, model_server.base_url, exec_policy())
    model_server.respond = shell_model
    marker = isolated_state / "denied-in-the-browser"
    with socket_gateway() as gateway:
        done = subprocess.run(
            [node, str(SPEC)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={
                **os.environ,
                "GATEWAY_URL": gateway.url,
                "GATEWAY_TOKEN": TOKEN,
                "CHROMIUM_PATH": chromium,
                "DENIED_MARKER": str(marker),
            },
            check=False,
        )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count(" ok\n") == 6, done.stdout
    assert not marker.exists()
