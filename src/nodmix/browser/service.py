"""Starting, sharing and stopping browsers: one profile per agent, started on first use and
closed when idle.

- The owner's turns of an agent use its persistent profile under
  `$NODMIX_STATE_DIR/browser/<agent>/profile` (cookies and logins survive restarts).
- A turn that does not speak for the owner (a group chat, another person's DM, automation) or
  a sandboxed session gets an ephemeral context of its own in a separate browser process that
  never opens the owner's profile; at most `MAX_GUEST_CONTEXTS` are kept (least recently used
  closed first).
- With `cdpUrl` both kinds are contexts of the remote browser; the owner's cookies are kept in
  `browser/<agent>/storage.json` and loaded into its context on the next start.

A launched Chromium connects through the loopback guard proxy (`proxy.py`) unless
`allowPrivateNetwork` is on; a remote browser's requests are checked by route interception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.browser.policy import BlockedAddress, RefusedLog
from nodmix.browser.proxy import GuardProxy
from nodmix.browser.session import BrowserSession
from nodmix.browser.settings import MAX_GUEST_CONTEXTS, BrowserSettings
from nodmix.errors import ToolError

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Playwright, Route, WebSocketRoute

log = logging.getLogger(__name__)

VIEWPORT = {"width": 1280, "height": 800}
_CHROMIUM_ARGS = (
    "--disable-quic",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--no-first-run",
    "--no-default-browser-check",
)


def _import_playwright() -> Any:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        from nodmix.extras import hint, part

        raise ToolError(f"browser: {hint(part('browser'))}") from None
    return async_playwright


class BrowserService:
    """Every browser of one Nodmix process."""

    def __init__(self, settings: BrowserSettings, state_dir: Path) -> None:
        self.settings = settings
        self._root = state_dir / "browser"
        self._playwright: Playwright | None = None
        self._proxy: GuardProxy | None = None
        self.refused = RefusedLog()
        self._owners: dict[str, BrowserSession] = {}
        self._guests: OrderedDict[tuple[str, str], BrowserSession] = OrderedDict()
        self._guest_browser: Browser | None = None
        self._remote: Browser | None = None
        self._start_lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None

    # ---- sessions -------------------------------------------------------------------------

    async def session(self, agent_id: str, session_key: str, *, owner: bool) -> BrowserSession:
        """The context for a call: the agent's profile for the owner, else the session's own."""
        async with self._start_lock:
            if owner:
                found = self._owners.get(agent_id)
                if found is None or found.closed:
                    found = await self._open_owner(agent_id)
                    self._owners[agent_id] = found
            else:
                key = (agent_id, session_key)
                found = self._guests.get(key)
                if found is None or found.closed:
                    found = await self._open_guest()
                    self._guests[key] = found
                self._guests.move_to_end(key)
                while len(self._guests) > MAX_GUEST_CONTEXTS:
                    _, oldest = self._guests.popitem(last=False)
                    await oldest.close()
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.ensure_future(self._reap())
        found.touch()
        return found

    @property
    def open_sessions(self) -> int:
        """Contexts open now (owner and guest)."""
        return sum(1 for s in (*self._owners.values(), *self._guests.values()) if not s.closed)

    async def _open_owner(self, agent_id: str) -> BrowserSession:
        pw = await self._ensure_playwright()
        self._root.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder = self._root / _safe(agent_id)
        folder.mkdir(exist_ok=True, mode=0o700)
        if self.settings.cdp_url:
            remote = await self._ensure_remote(pw)
            storage = folder / "storage.json"
            context = await remote.new_context(
                viewport=VIEWPORT,  # type: ignore[arg-type]
                accept_downloads=True,
                storage_state=storage if storage.is_file() else None,
            )
            await self._route_guard(context)
            return BrowserSession(
                context,
                self.settings,
                refused=self.refused,
                downloads_dir=None,
                on_close=None,
            )
        downloads = folder / "downloads-partial"
        downloads.mkdir(exist_ok=True, mode=0o700)
        try:
            context = await pw.chromium.launch_persistent_context(
                str(folder / "profile"),
                executable_path=self.settings.executable_path,
                headless=self.settings.headless,
                args=await self._launch_args(),
                viewport=VIEWPORT,  # type: ignore[arg-type]
                accept_downloads=True,
                downloads_path=str(downloads),
                timeout=self.settings.timeout_seconds * 1000,
            )
        except Exception as exc:
            raise ToolError(self._launch_error(exc)) from None
        return BrowserSession(context, self.settings, refused=self.refused, downloads_dir=downloads)

    async def _open_guest(self) -> BrowserSession:
        pw = await self._ensure_playwright()
        if self.settings.cdp_url:
            remote = await self._ensure_remote(pw)
            context = await remote.new_context(viewport=VIEWPORT, accept_downloads=True)  # type: ignore[arg-type]
            await self._route_guard(context)
            return BrowserSession(context, self.settings, refused=self.refused, downloads_dir=None)
        downloads = self._root / "guest-downloads-partial"
        if self._guest_browser is None or not self._guest_browser.is_connected():
            self._root.mkdir(parents=True, exist_ok=True, mode=0o700)
            downloads.mkdir(exist_ok=True, mode=0o700)
            try:
                self._guest_browser = await pw.chromium.launch(
                    executable_path=self.settings.executable_path,
                    headless=self.settings.headless,
                    args=await self._launch_args(),
                    downloads_path=str(downloads),
                    timeout=self.settings.timeout_seconds * 1000,
                )
            except Exception as exc:
                raise ToolError(self._launch_error(exc)) from None
        context = await self._guest_browser.new_context(viewport=VIEWPORT, accept_downloads=True)  # type: ignore[arg-type]
        return BrowserSession(context, self.settings, refused=self.refused, downloads_dir=downloads)

    # ---- parts ----------------------------------------------------------------------------

    async def _ensure_playwright(self) -> Playwright:
        if self._playwright is None:
            async_playwright = _import_playwright()
            # Playwright's driver must never fetch a browser of its own.
            os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            self._playwright = await async_playwright().start()
        return self._playwright

    async def _ensure_remote(self, pw: Playwright) -> Browser:
        if self._remote is None or not self._remote.is_connected():
            assert self.settings.cdp_url is not None
            try:
                self._remote = await pw.chromium.connect_over_cdp(
                    self.settings.cdp_url, timeout=self.settings.timeout_seconds * 1000
                )
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ToolError(
                    f"browser: cannot connect to tools.browser.cdpUrl {self.settings.cdp_url}: "
                    f"{first}"
                ) from None
        return self._remote

    async def _launch_args(self) -> list[str]:
        args = list(_CHROMIUM_ARGS)
        if not self.settings.policy.allow_private:
            if self._proxy is None:
                self._proxy = GuardProxy(self.settings.policy, self.refused)
                await self._proxy.start()
            args += [f"--proxy-server={self._proxy.url}", "--proxy-bypass-list=<-loopback>"]
        return args

    def _launch_error(self, exc: Exception) -> str:
        path = self.settings.executable_path
        if not Path(path).exists():
            return (
                f"browser: Chromium is not installed at {path}: install Debian's chromium "
                "(apt-get install chromium) or set tools.browser.executablePath"
            )
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "ProcessSingleton" in first:
            return (
                "browser: the agent's browser profile is in use by another Nodmix process "
                "(the gateway, or another `nodmix agent --local`); use that one, or stop it"
            )
        return f"browser: Chromium ({path}) did not start: {first.split(': ', 1)[-1]}"

    async def _route_guard(self, context: BrowserContext) -> None:
        """A remote browser resolves names itself: check each request's host here (no DNS
        pinning is possible from outside that browser; keep it on a network of its own)."""
        policy = self.settings.policy
        if policy.allow_private:
            return
        from urllib.parse import urlsplit

        async def check(url: str) -> bool:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
                return True
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
            try:
                await policy.resolve(parts.hostname, port)
            except BlockedAddress as exc:
                self.refused.add(f"{exc}:{port}")
                return False
            except (OSError, TimeoutError):
                return True  # the browser will fail to resolve it too
            return True

        async def on_request(route: Route) -> None:
            if await check(route.request.url):
                await route.fallback()
            else:
                await route.abort("blockedbyclient")

        async def on_socket(ws: WebSocketRoute) -> None:
            if await check(ws.url):
                ws.connect_to_server()
            else:
                await ws.close(code=1008, reason="blocked by Nodmix")

        await context.route("**/*", on_request)
        await context.route_web_socket("**/*", on_socket)

    # ---- idle and shutdown ----------------------------------------------------------------

    async def _reap(self) -> None:
        """Close contexts idle for `idleSeconds`; stop everything when none is left."""
        interval = max(1.0, min(30.0, self.settings.idle_seconds / 4))
        while True:
            await asyncio.sleep(interval)
            cutoff = time.monotonic() - self.settings.idle_seconds
            for key, found in list(self._owners.items()):
                if found.last_used < cutoff and not found.lock.locked():
                    await self._close_owner(key, found)
            for gkey, guest in list(self._guests.items()):
                if guest.last_used < cutoff and not guest.lock.locked():
                    self._guests.pop(gkey, None)
                    await guest.close()
            if self.open_sessions == 0:
                async with self._start_lock:
                    if self.open_sessions == 0:
                        await self._stop_processes()
                        return

    async def _close_owner(self, agent_id: str, found: BrowserSession) -> None:
        self._owners.pop(agent_id, None)
        if self.settings.cdp_url and not found.closed:
            storage = self._root / _safe(agent_id) / "storage.json"
            with contextlib.suppress(Exception):
                state = await found.context.storage_state()
                _write_private_json(storage, state)
        await found.close()

    async def _stop_processes(self) -> None:
        for browser in (self._guest_browser, self._remote):
            if browser is not None:
                with contextlib.suppress(Exception):
                    await browser.close()
        self._guest_browser = self._remote = None
        if self._proxy is not None:
            await self._proxy.close()
            self._proxy = None
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None

    async def aclose(self) -> None:
        """Close every context and process (the owner's profiles stay on disk)."""
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(BaseException):
                await reaper
        for key, found in list(self._owners.items()):
            await self._close_owner(key, found)
        for guest in list(self._guests.values()):
            await guest.close()
        self._guests.clear()
        await self._stop_processes()


def _safe(agent_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in agent_id) or "main"


def _write_private_json(path: Path, data: Any) -> None:
    """Atomically, mode 0600 (the remote browser's cookies of the owner)."""
    import json

    from nodmix.assets.files import atomic_write

    atomic_write(path, json.dumps(data).encode())
