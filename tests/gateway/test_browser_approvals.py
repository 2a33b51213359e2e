"""The web page's approval buttons in real headless Chromium: Allow once runs the command,
Deny refuses it (the model reads why), and pending requests survive a page reload.

Needs Debian's `chromium` and `playwright-core` in node_modules, like `test_browser.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway, write_config
from tests.security.support import exec_policy, shell_model

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_approve_and_deny_buttons_answer_exec_approvals_in_chromium(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, exec_policy())
    model_server.respond = shell_model
    marker = isolated_state / "denied-in-the-browser"
    with socket_gateway() as gateway:
        done = run_spec("approvals", gateway.url, DENIED_MARKER=str(marker))
    assert_steps_passed(done, 6)
    assert not marker.exists()
