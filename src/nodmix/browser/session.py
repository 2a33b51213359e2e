"""One browser context the agent drives: its tabs, its downloads, its refused requests.

A context is the owner's persistent profile for an agent, or an ephemeral context for a
session that does not speak for the owner. Actions on one context run one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from nodmix.browser.files import place_file
from nodmix.browser.policy import RefusedLog
from nodmix.browser.settings import BrowserSettings
from nodmix.errors import ToolError, WorkspaceEscapeError

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Download, Page

log = logging.getLogger(__name__)

DOWNLOAD_POLL_SECONDS = 0.2
DOWNLOADS_KEPT = 20
MAX_DOWNLOADS_PER_CALL = 10
"""Downloads saved from what the pages start between two browser calls; more are cancelled
(a page that starts downloads in a loop cannot fill the disk)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


class BrowserSession:
    """A context with ordered tabs and a current one."""

    def __init__(
        self,
        context: BrowserContext,
        settings: BrowserSettings,
        *,
        refused: RefusedLog,
        downloads_dir: Path | None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.context = context
        self.settings = settings
        self.refused = refused
        self.lock = asyncio.Lock()
        self.last_used = time.monotonic()
        self.workspace: Path | None = None
        self.tabs: list[Page] = []
        self.current = 0
        self.refs: dict[Page, set[str]] = {}
        """The refs of each tab's last snapshot."""
        self.popups_closed = 0
        """Tabs the page opened past `maxTabs` since the last result (closed at once)."""
        self.notes: list[str] = []
        """Downloads finished or refused since the last result (reported once)."""
        self._downloads_dir = downloads_dir
        self._pending: set[Download] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._downloading: set[asyncio.Task[None]] = set()
        self._download_seen = asyncio.Event()
        self.download_count = 0
        self._call_downloads = 0
        """Downloads started since the current (or last) browser call began."""
        self._downloads_refused = 0
        """Downloads cancelled past `MAX_DOWNLOADS_PER_CALL` since the last result."""
        self._on_close = on_close
        self.closed = False
        for page in context.pages:
            self._adopt(page)
        context.on("page", self._adopt)
        # The browser crashed or was closed from outside: the next call starts a new one.
        context.on("close", lambda _: setattr(self, "closed", True))

    # ---- tabs -----------------------------------------------------------------------------

    def _adopt(self, page: Page) -> None:
        """Track a new tab (ours, a popup or `target=_blank`); past `maxTabs` it is closed."""
        if page in self.tabs:
            return
        if len(self.tabs) >= self.settings.max_tabs:
            self.popups_closed += 1
            self._spawn(page.close())
            return
        self.tabs.append(page)
        self.current = len(self.tabs) - 1
        page.set_default_timeout(self.settings.timeout_seconds * 1000)
        page.on("close", lambda _: self._forget(page))
        page.on("download", self._on_download)

    def _on_download(self, download: Download) -> None:
        self.download_count += 1
        self._download_seen.set()
        if self._call_downloads >= MAX_DOWNLOADS_PER_CALL:
            self._downloads_refused += 1
            self._spawn(download.cancel())
            return
        self._call_downloads += 1
        task = self._spawn(self._download(download))
        self._downloading.add(task)
        task.add_done_callback(self._downloading.discard)

    def _forget(self, page: Page) -> None:
        self.refs.pop(page, None)
        if page in self.tabs:
            index = self.tabs.index(page)
            self.tabs.remove(page)
            if self.current >= index and self.current > 0:
                self.current -= 1

    async def page(self) -> Page:
        """The current tab (a new one when none is open)."""
        if not self.tabs:
            await self.open_tab()
        return self.tabs[self.current]

    async def open_tab(self) -> Page:
        """A new tab, made current.

        Raises:
            ToolError: `maxTabs` tabs are open already.
        """
        if len(self.tabs) >= self.settings.max_tabs:
            raise ToolError(
                f"browser: {len(self.tabs)} tabs are open, the most allowed "
                "(tools.browser.maxTabs); close one first."
            )
        page = await self.context.new_page()
        self._adopt(page)
        self.current = self.tabs.index(page)
        return page

    def focus(self, index: int) -> Page:
        """Make tab `index` (0-based) current."""
        if not 0 <= index < len(self.tabs):
            raise ToolError(f"browser: no tab {index}; open tabs are 0..{len(self.tabs) - 1}.")
        self.current = index
        return self.tabs[index]

    # ---- downloads ------------------------------------------------------------------------

    def begin_call(self) -> None:
        """A browser call starts: the pages may start `MAX_DOWNLOADS_PER_CALL` downloads
        again (counted until the next call begins)."""
        self._call_downloads = 0

    @property
    def downloads_running(self) -> int:
        """Downloads under way or being saved."""
        return sum(1 for task in self._downloading if not task.done())

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.debug("browser background work failed", exc_info=True)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def downloads_done(self, since: int, timeout: float) -> None:
        """Wait (at most `timeout` seconds) for a download after the `since`-th to start, and
        then for the downloads under way to end."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.download_count <= since:
                    self._download_seen.clear()
                    await self._download_seen.wait()
                pending = [t for t in self._downloading if not t.done()]
                if pending:
                    await asyncio.wait(pending)

    async def _download(self, download: Download) -> None:
        """Save a download into the workspace's `downloads/`, cancelled past the size cap."""
        cap = self.settings.max_download_bytes
        if self.workspace is None:
            await download.cancel()
            return
        self._pending.add(download)
        watch = asyncio.ensure_future(self._watch_size(download))
        try:
            async with asyncio.timeout(max(60.0, self.settings.timeout_seconds * 4)):
                failure = await download.failure()
        except TimeoutError:
            await download.cancel()
            failure = "timed out"
        finally:
            watch.cancel()
            self._pending.discard(download)
        name = _UNSAFE.sub("_", download.suggested_filename).strip(" .") or "download"
        if failure is not None:
            reason = f"larger than {cap} bytes" if getattr(download, "too_big", False) else failure
            self._note(f"Download {name!r} was not saved: {reason}.")
            return
        workspace = self.workspace
        with tempfile.TemporaryDirectory(prefix="nodmix-download-") as staging:
            staged = Path(staging) / "download"
            await download.save_as(staged)
            size = staged.stat().st_size
            if size > cap:  # finished between two looks of `_watch_size`
                self._note(f"Download {name!r} was not saved: larger than {cap} bytes.")
                return
            try:
                rel = await anyio.to_thread.run_sync(
                    place_file, workspace, "downloads", name, staged
                )
            except (WorkspaceEscapeError, OSError) as exc:
                self._note(f"Download {name!r} was not saved: {exc}.")
                return
        self._note(f"Downloaded {rel} ({size} bytes) to the workspace.")

    def _note(self, line: str) -> None:
        self.notes.append(line)
        self.notes = self.notes[-DOWNLOADS_KEPT:]

    async def _watch_size(self, download: Download) -> None:
        """Cancel the download when a file in progress passes the cap (files in progress are
        only known by the browser's own names, so every download of this browser in progress
        then is cancelled)."""
        folder = self._downloads_dir
        if folder is None:
            return
        cap = self.settings.max_download_bytes
        while True:
            await asyncio.sleep(DOWNLOAD_POLL_SECONDS)
            with contextlib.suppress(OSError):
                if any(f.stat().st_size > cap for f in folder.iterdir() if f.is_file()):
                    download.too_big = True  # type: ignore[attr-defined]
                    await download.cancel()
                    return

    # ---- life -----------------------------------------------------------------------------

    def take_notes(self) -> list[str]:
        """What happened besides the action since the last result (reported once)."""
        notes, self.notes = self.notes, []
        if self._downloads_refused:
            notes.append(
                f"{self._downloads_refused} more downloads the page started were cancelled: "
                f"at most {MAX_DOWNLOADS_PER_CALL} are saved per browser call."
            )
            self._downloads_refused = 0
        if self.popups_closed:
            notes.append(
                f"{self.popups_closed} tab(s) the page opened were closed: at most "
                f"{self.settings.max_tabs} are kept (tools.browser.maxTabs)."
            )
            self.popups_closed = 0
        return notes

    def touch(self) -> None:
        """Mark the session as used now (the idle timer starts over)."""
        self.last_used = time.monotonic()

    async def close(self) -> None:
        """Close the context (the owner's profile stays on disk)."""
        if self.closed:
            return
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.context.close()
        if self._on_close is not None:
            with contextlib.suppress(Exception):
                await self._on_close()
