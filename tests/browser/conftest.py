"""The test site and a browser tool on Debian's Chromium (`make browser` installs it)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.browser.policy import NetworkPolicy
from nodmix.browser.settings import BrowserSettings
from nodmix.browser.tool import BrowserTool
from nodmix.testing.web_site import TestSite
from nodmix.tools.base import ToolContext, ToolResult


@pytest.fixture(scope="session")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian chromium is missing: run scripts/ensure-chromium.sh (make browser)")
    return path


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with TestSite() as running:
        yield running


def settings(chromium: str, **keys: object) -> BrowserSettings:
    """The site's own address (127.0.0.1) allowed; `localhost` stays private."""
    keys.setdefault("policy", NetworkPolicy(allow_hosts=("127.0.0.1",)))
    keys.setdefault("timeout_seconds", 5.0)
    return BrowserSettings(executable_path=chromium, **keys)  # type: ignore[arg-type]


def context(
    workspace: Path, *, session_key: str = "agent:main:main", **extra: object
) -> ToolContext:
    workspace.mkdir(exist_ok=True)
    return ToolContext(
        agent_id="main", session_key=session_key, session_id="s", run_id="r", call_id="c",
        workspace=workspace, **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def ref(result: ToolResult, role: str, name: str) -> str:
    """The ref of the element `- role "name" [ref=...]` in a snapshot."""
    found = re.search(rf'- {role} "{re.escape(name)}" \[ref=(\w+)\]', result.text_content)
    assert found, result.text_content
    return found.group(1)


@pytest.fixture
def browser_tool(chromium: str, isolated_state: Path) -> BrowserTool:
    return BrowserTool(settings(chromium), isolated_state)
