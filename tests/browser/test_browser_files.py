"""What the browser writes into the workspace (downloads, screenshots, PDFs) on a real
headless Chromium: never through a symlink that a sandboxed command planted in the shared
workspace, and never more downloads per call than the cap, whatever a page starts."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest

from nodmix.browser.session import MAX_DOWNLOADS_PER_CALL
from nodmix.browser.tool import BrowserTool
from nodmix.errors import ToolError
from nodmix.testing.web_site import TestSite
from tests.browser.conftest import context, settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.anyio]


async def test_a_planted_downloads_symlink_is_not_followed_out_of_the_workspace(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    workspace.mkdir()
    (workspace / "downloads").symlink_to(outside)  # what `ln -s` in the sandbox can do
    tool = BrowserTool(settings(chromium), isolated_state)
    ctx = context(workspace, session_key="agent:main:telegram:group:-100")
    try:
        result = await tool.call({"action": "navigate", "url": site.url("/download/small")}, ctx)
    finally:
        await tool.aclose()
    assert list(outside.iterdir()) == []
    assert "Download 'small.bin' was not saved" in result.text_content
    assert "symlink" in result.text_content


async def test_a_planted_symlink_in_the_downloads_folder_is_never_written_through(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (workspace / "downloads").mkdir(parents=True)
    (workspace / "downloads" / "small.bin").symlink_to(outside / "authorized_keys")
    tool = BrowserTool(settings(chromium), isolated_state)
    try:
        result = await tool.call(
            {"action": "navigate", "url": site.url("/download/small")}, context(workspace)
        )
    finally:
        await tool.aclose()
    assert not (outside / "authorized_keys").exists()
    assert "Downloaded downloads/small (2).bin (2048 bytes)" in result.text_content
    assert (workspace / "downloads" / "small (2).bin").stat().st_size == 2048


async def test_screenshots_and_pdfs_are_not_written_through_a_planted_symlink(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    workspace.mkdir()
    (workspace / "browser").symlink_to(outside)
    ctx = context(workspace)
    try:
        await browser_tool.call({"action": "navigate", "url": site.url("/form")}, ctx)
        with pytest.raises(ToolError, match="screenshot was not saved.*symlink"):
            await browser_tool.call({"action": "screenshot"}, ctx)
        with pytest.raises(ToolError, match="PDF was not saved.*symlink"):
            await browser_tool.call({"action": "pdf"}, ctx)
    finally:
        await browser_tool.aclose()
    assert list(outside.iterdir()) == []


async def test_a_page_starting_a_flood_of_downloads_gets_only_the_cap_saved_per_call(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    tool = BrowserTool(settings(chromium), isolated_state)
    workspace = tmp_path / "ws"
    ctx = context(workspace)
    try:
        url = site.url(f"/download/many?n={MAX_DOWNLOADS_PER_CALL + 20}")
        await tool.call({"action": "navigate", "url": url}, ctx)
        (session,) = tool.service._owners.values()
        deadline = time.monotonic() + 60
        # Past the cap every further download is cancelled; those within it are saved.
        while session.download_count <= MAX_DOWNLOADS_PER_CALL + 2 or session.downloads_running:
            assert time.monotonic() < deadline, (session.download_count, session.notes)
            await anyio.sleep(0.05)
        saved = sorted(p.name for p in (workspace / "downloads").iterdir())
        after = await tool.call({"action": "snapshot"}, ctx)
    finally:
        await tool.aclose()
    assert len(saved) == MAX_DOWNLOADS_PER_CALL
    refused = re.search(
        rf"(\d+) more downloads the page started were cancelled: at most "
        rf"{MAX_DOWNLOADS_PER_CALL} are saved per browser call",
        after.text_content,
    )
    assert refused is not None and int(refused.group(1)) >= 3, after.text_content
