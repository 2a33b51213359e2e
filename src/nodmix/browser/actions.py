"""The browser tool's actions on a `BrowserSession`: each returns what the model reads.

Actions that change or read the page end with a fresh snapshot; `screenshot` and `pdf` save a
file in the workspace (`browser/`), `tabs` lists the tabs. Every Playwright call runs under
`timeoutSeconds`; a page that never finishes loading is snapshotted as far as it got.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import msgspec

from nodmix.browser.files import save_new
from nodmix.browser.policy import BlockedAddress
from nodmix.browser.session import BrowserSession
from nodmix.browser.snapshot import bounded, compact, untrusted
from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.messages import ImageBlock, JsonObject, ResultBlock, TextBlock

if TYPE_CHECKING:
    from playwright.async_api import Page

MAX_SCREENSHOT_HEIGHT = 8000
_REF = re.compile(r"\[ref=([a-z0-9]+)\]")
_REF_NAME = re.compile(r"(?:f\d+)?e\d+")
MAX_WAIT_MS = 60_000


class Outcome(msgspec.Struct, kw_only=True):
    """What an action produced, before the snapshot is added."""

    snapshot: bool = True
    lines: list[str] = msgspec.field(default_factory=list)
    blocks: list[ResultBlock] = msgspec.field(default_factory=list)
    details: JsonObject = msgspec.field(default_factory=dict)


Progress = Callable[[str], None]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    for prefix in ("Page.", "Locator.", "Keyboard.", "Frame."):
        if line.startswith(prefix):
            line = line.split(":", 1)[-1].strip()
    return line


def check_url(raw: str) -> str:
    """An absolute http(s) URL (or `about:blank`)."""
    url = raw.strip()
    if url == "about:blank":
        return url
    parts = urlsplit(url)
    if not parts.scheme:
        raise ToolError(f"browser: {url!r} has no scheme; use a full URL such as https://{url}")
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"browser: only http:// and https:// pages can be opened, not {url!r}.")
    if not parts.hostname:
        raise ToolError(f"browser: {url!r} has no host.")
    return url


async def _precheck(session: BrowserSession, url: str) -> None:
    """Refuse a private address before the browser tries (a clear line, no error page)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        await session.settings.policy.resolve(parts.hostname, port)
    except BlockedAddress as exc:
        raise ToolError(blocked_line(str(exc))) from None
    except (OSError, TimeoutError) as exc:
        raise ToolError(f"browser: cannot resolve {parts.hostname}: {exc}") from None


def blocked_line(what: str) -> str:
    """The line for a refused private address."""
    return (
        f"browser: {what} is refused: loopback, link-local and private addresses are blocked; "
        "set tools.browser.allowPrivateNetwork or list the host in tools.browser.allowHosts."
    )


async def settle(page: Page, timeout_ms: float) -> str | None:
    """Wait for the DOM of a navigation the action started; a note when it did not finish."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        await page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)
    except PlaywrightTimeout:
        return f"[The page was still loading after {timeout_ms / 1000:g} s.]"
    return None


async def navigate(session: BrowserSession, page: Page, url: str, progress: Progress) -> Outcome:
    """Open `url` in `page`; a page that never finishes loading is shown as far as it got."""
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    url = check_url(url)
    await _precheck(session, url)
    mark = session.refused.count
    downloads = session.download_count
    progress(f"opening {url}")
    timeout_ms = session.settings.timeout_seconds * 1000
    out = Outcome()
    try:
        response = await page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
    except PlaywrightTimeout:
        out.lines.append(f"[The page was still loading after {timeout_ms / 1000:g} s.]")
        response = None
    except PlaywrightError as exc:
        refused = session.refused.since(mark)
        if refused:
            raise ToolError(blocked_line(refused[-1])) from None
        if "Download is starting" in str(exc):
            progress("downloading")
            await session.downloads_done(downloads, timeout_ms / 1000 * 4)
            return Outcome()
        raise ToolError(f"browser: opening {url} failed: {_first_line(exc)}") from None
    if response is not None and response.status >= 400:
        out.lines.append(f"HTTP status {response.status}.")
    return out


def _locator(session: BrowserSession, page: Page, ref: str) -> Any:
    """The element of a ref from this tab's last snapshot (a stale or made-up ref fails at
    once instead of waiting for an element that will never come)."""
    ref = ref.strip().removeprefix("[").removesuffix("]").removeprefix("ref=")
    if not _REF_NAME.fullmatch(ref):
        raise ToolError(f"browser: {ref!r} is not a ref; use one from the snapshot, e.g. e7.")
    known = session.refs.get(page)
    if known is None or ref not in known:
        raise ToolError(
            f"browser: [ref={ref}] is not in this tab's last snapshot; take a new snapshot."
        )
    return page.locator(f"aria-ref={ref}")


async def on_element(
    session: BrowserSession,
    page: Page,
    ref: str,
    what: str,
    act: Callable[[Any], Any],
    timeout_ms: float,
) -> Outcome:
    """Run `act` on the element `ref` names (then let a navigation it started load), with a
    line the model can act on when it fails."""
    from playwright.async_api import Error as PlaywrightError

    try:
        await act(_locator(session, page, ref))
    except PlaywrightError as exc:
        line = _first_line(exc)
        if "resolved to" not in str(exc) and "Timeout" in line:
            line = "no such element now; take a new snapshot"
        raise ToolError(f"browser: {what} [ref={ref}] failed: {line}") from None
    note = await settle(page, timeout_ms)
    return Outcome(lines=[note] if note else [])


async def screenshot(page: Page, workspace: Path, full_page: bool) -> Outcome:
    """A PNG (viewport) or JPEG (full page, at most 8000 px tall) image and its file."""
    kind = "jpeg" if full_page else "png"
    options: dict[str, Any] = {"type": kind, "full_page": full_page}
    if full_page:
        options["quality"] = 75
        height = await page.evaluate("document.documentElement.scrollHeight")
        if isinstance(height, int | float) and height > MAX_SCREENSHOT_HEIGHT:
            width = (page.viewport_size or {"width": 1280})["width"]
            options["clip"] = {"x": 0, "y": 0, "width": width, "height": MAX_SCREENSHOT_HEIGHT}
    data = await page.screenshot(**options)
    rel = await _save(workspace, "screenshot", "jpg" if full_page else "png", data)
    return Outcome(
        snapshot=False,
        lines=[f"Screenshot saved to {rel} ({len(data)} bytes)."],
        blocks=[ImageBlock(data=base64.b64encode(data).decode(), mime_type=f"image/{kind}")],
        details={"path": rel, "bytes": len(data)},
    )


async def pdf(page: Page, workspace: Path, headless: bool) -> Outcome:
    """The page printed to PDF in the workspace (headless Chromium only)."""
    if not headless:
        raise ToolError("browser: pdf needs a headless browser (tools.browser.headless).")
    data = await page.pdf(print_background=True)
    rel = await _save(workspace, "page", "pdf", data)
    return Outcome(
        snapshot=False,
        lines=[f"PDF saved to {rel} ({len(data)} bytes)."],
        details={"path": rel, "bytes": len(data)},
    )


async def _save(workspace: Path, stem: str, suffix: str, data: bytes) -> str:
    """`data` as a new file `browser/<stem>-<time>.<suffix>` in the workspace, never through a
    symlink (`browser.files`); the workspace-relative path."""
    name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.{suffix}"
    what = "PDF" if suffix == "pdf" else stem
    try:
        return await anyio.to_thread.run_sync(save_new, workspace, "browser", name, data)
    except (WorkspaceEscapeError, OSError) as exc:
        raise ToolError(f"browser: the {what} was not saved: {exc}") from None


async def tabs(session: BrowserSession) -> Outcome:
    """One line per tab: index, title, URL; the current one marked."""
    lines = []
    listed = []
    for index, tab in enumerate(session.tabs):
        title = await _title(tab)
        mark = "*" if index == session.current else " "
        lines.append(f"{mark} {index}: {title} — {tab.url}")
        listed.append({"tab": index, "title": title, "url": tab.url})
    text = "\n".join(lines) if lines else "No tabs are open."
    return Outcome(
        snapshot=False,
        lines=[untrusted(text, "the open tabs")],
        details={"tabs": listed, "current": session.current},
    )


async def _title(page: Page) -> str:
    try:
        return await page.title()
    except Exception:
        return ""


async def snapshot_text(session: BrowserSession, page: Page) -> tuple[str, JsonObject]:
    """The marked snapshot of `page` and its details."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    timeout_ms = session.settings.timeout_seconds * 1000
    limit = session.settings.max_snapshot_chars
    try:
        raw, title = await asyncio.gather(
            page.aria_snapshot(mode="ai", timeout=timeout_ms), _title(page)
        )
    except PlaywrightTimeout:
        title = await _title(page)
        # A page with tens of thousands of elements: its plain text, without refs.
        session.refs[page] = set()
        plain = await page.evaluate(
            "(n) => document.body ? document.body.innerText.slice(0, n) : ''", limit
        )
        text, _ = bounded(str(plain), limit)
        text += (
            f"\n[The page is too large to snapshot within {timeout_ms / 1000:g} s: its text "
            "only, without refs.]"
        )
        cut = True
    else:
        session.refs[page] = set(_REF.findall(raw))
        text, cut = bounded(compact(raw), limit)
        if cut:
            text += f"\n[Snapshot cut at {limit} characters; scroll or open a part of the page.]"
    body = untrusted(f"title: {title}\n{text}", page.url)
    return body, {"url": page.url, "title": title, "snapshotChars": len(text), "truncated": cut}


async def wait(page: Page, text: str | None, ms: int | None, timeout_ms: float) -> Outcome:
    """Wait for `text` to appear, or for `ms` milliseconds (at most a minute)."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    if text:
        try:
            await page.get_by_text(text).first.wait_for(timeout=timeout_ms)
        except PlaywrightTimeout:
            return Outcome(lines=[f"[{text!r} did not appear within {timeout_ms / 1000:g} s.]"])
        return Outcome()
    await page.wait_for_timeout(min(ms or 1000, MAX_WAIT_MS, int(timeout_ms)))
    return Outcome()


async def scroll(page: Page, direction: str) -> Outcome:
    """Scroll the page: up/down by most of a screen, or to the top/bottom."""
    height = (page.viewport_size or {"height": 800})["height"]
    if direction == "top":
        await page.evaluate("window.scrollTo(0, 0)")
    elif direction == "bottom":
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    else:
        await page.mouse.wheel(0, height * 0.8 * (-1 if direction == "up" else 1))
    return Outcome()


def text_blocks(lines: list[str]) -> list[ResultBlock]:
    """One text block for the lines (none when empty)."""
    return [TextBlock(text="\n".join(lines))] if lines else []
