"""The browser tool on a real headless Chromium against the local test site: forms, links, a
page that changes after a click, tabs, screenshots, PDFs, downloads, hostile pages."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from nodmix.browser.tool import BrowserTool
from nodmix.errors import ToolError
from nodmix.messages import ImageBlock
from nodmix.testing.web_site import TestSite
from tests.browser.conftest import context, ref, settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.anyio]


async def test_fills_and_sends_a_form_and_reads_the_answer(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    ctx = context(tmp_path / "ws", extra={"progress": (said := []).append})
    try:
        page = await browser_tool.call({"action": "navigate", "url": site.url("/form")}, ctx)
        text = page.text_content
        assert text.startswith(f"Tab 0 of 1: {site.url('/form')}")
        assert "<<<page content from" in text and "untrusted" in text
        assert '- heading "Contact us" [level=1]' in text
        assert page.details["title"] == "Contact us"
        typed = await browser_tool.call(
            {"action": "type", "ref": ref(page, "textbox", "Your name"), "text": "Ada"}, ctx
        )
        assert '- textbox "Your name" [ref=' in typed.text_content
        await browser_tool.call(
            {"action": "select", "ref": ref(page, "combobox", "Colour"), "values": ["blue"]}, ctx
        )
        await browser_tool.call(
            {"action": "click", "ref": ref(page, "checkbox", "Send me news")}, ctx
        )
        done = await browser_tool.call({"action": "click", "ref": ref(page, "button", "Send")}, ctx)
    finally:
        await browser_tool.aclose()
    assert "Thanks, Ada! Your favourite colour is blue." in done.text_content
    assert site.submissions[-1] == {"name": "Ada", "colour": "blue", "news": "yes"}
    assert f"opening {site.url('/form')}" in said


async def test_a_click_that_changes_the_page_gives_a_fresh_snapshot_with_stable_refs(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    ctx = context(tmp_path / "ws")
    try:
        page = await browser_tool.call({"action": "navigate", "url": site.url("/changes")}, ctx)
        button = ref(page, "button", "Change the page")
        after = await browser_tool.call({"action": "click", "ref": button}, ctx)
        assert '- heading "After" [level=1]' in after.text_content
        assert "The button was clicked." in after.text_content
        assert ref(after, "button", "Change the page") == button  # the same element, same ref
        assert ref(after, "button", "Another button")
        with pytest.raises(ToolError, match=r"not in this tab's last snapshot"):
            await browser_tool.call({"action": "click", "ref": "e999"}, ctx)
    finally:
        await browser_tool.aclose()


async def test_links_back_tabs_focus_and_close(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    ctx = context(tmp_path / "ws")
    try:
        home = await browser_tool.call({"action": "navigate", "url": site.url("/")}, ctx)
        article = await browser_tool.call(
            {"action": "click", "ref": ref(home, "link", "Article")}, ctx
        )
        assert article.details["url"] == site.url("/article")
        back = await browser_tool.call({"action": "back"}, ctx)
        assert back.details["url"] == site.url("/")
        opened = await browser_tool.call({"action": "open", "url": site.url("/form")}, ctx)
        assert opened.text_content.startswith("Tab 1 of 2:")
        tabs = await browser_tool.call({"action": "tabs"}, ctx)
        assert [t["url"] for t in tabs.details["tabs"]] == [site.url("/"), site.url("/form")]
        assert "* 1: Contact us" in tabs.text_content
        focused = await browser_tool.call({"action": "focus", "tab": 0}, ctx)
        assert focused.details["url"] == site.url("/")
        closed = await browser_tool.call({"action": "close"}, ctx)
        assert closed.details["url"] == site.url("/form")
    finally:
        await browser_tool.aclose()


async def test_screenshot_is_an_image_and_a_file_and_pdf_is_a_file(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    ctx = context(workspace)
    try:
        await browser_tool.call({"action": "navigate", "url": site.url("/article")}, ctx)
        shot = await browser_tool.call({"action": "screenshot"}, ctx)
        full = await browser_tool.call({"action": "screenshot", "fullPage": True}, ctx)
        printed = await browser_tool.call({"action": "pdf"}, ctx)
    finally:
        await browser_tool.aclose()
    image = shot.content[1]
    assert isinstance(image, ImageBlock) and image.mime_type == "image/png"
    data = base64.b64decode(image.data)
    assert data.startswith(b"\x89PNG") and (workspace / shot.details["path"]).read_bytes() == data
    assert isinstance(full.content[1], ImageBlock) and full.content[1].mime_type == "image/jpeg"
    assert (workspace / printed.details["path"]).read_bytes().startswith(b"%PDF")


async def test_downloads_land_in_the_workspace_and_an_endless_one_is_cancelled(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    tool = BrowserTool(settings(chromium, max_download_bytes=1_000_000), isolated_state)
    workspace = tmp_path / "ws"
    ctx = context(workspace)
    try:
        small = await tool.call({"action": "navigate", "url": site.url("/download/small")}, ctx)
        endless = await tool.call({"action": "navigate", "url": site.url("/download/endless")}, ctx)
    finally:
        await tool.aclose()
    assert "Downloaded downloads/small.bin (2048 bytes)" in small.text_content
    assert (workspace / "downloads" / "small.bin").stat().st_size == 2048
    assert "'endless.bin' was not saved: larger than 1000000 bytes" in endless.text_content
    assert not (workspace / "downloads" / "endless.bin").exists()
