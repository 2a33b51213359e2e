"""`tools.browser` resolved with its defaults."""

from __future__ import annotations

import shutil

import msgspec

from nodmix.browser.policy import NetworkPolicy
from nodmix.config.web_schema import BrowserToolConfig

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_TABS = 8
DEFAULT_IDLE_SECONDS = 300.0
DEFAULT_MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_SNAPSHOT_CHARS = 40_000
MAX_GUEST_CONTEXTS = 8
"""Browser contexts of sessions that do not speak for the owner, kept at once (LRU)."""


class BrowserSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the browser service needs, defaults applied."""

    executable_path: str = DEFAULT_EXECUTABLE
    cdp_url: str | None = None
    headless: bool = True
    policy: NetworkPolicy = NetworkPolicy()
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_tabs: int = DEFAULT_MAX_TABS
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES
    max_snapshot_chars: int = DEFAULT_MAX_SNAPSHOT_CHARS


def resolve_browser(section: BrowserToolConfig | None) -> BrowserSettings | None:
    """The settings when `tools.browser.enabled` is true, else None."""
    if section is None or not section.enabled:
        return None
    return BrowserSettings(
        executable_path=section.executable_path
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
        or DEFAULT_EXECUTABLE,
        cdp_url=section.cdp_url or None,
        headless=True if section.headless is None else section.headless,
        policy=NetworkPolicy(
            allow_private=bool(section.allow_private_network),
            allow_hosts=tuple(section.allow_hosts),
        ),
        timeout_seconds=section.timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
        max_tabs=section.max_tabs or DEFAULT_MAX_TABS,
        idle_seconds=section.idle_seconds or DEFAULT_IDLE_SECONDS,
        max_download_bytes=section.max_download_bytes or DEFAULT_MAX_DOWNLOAD_BYTES,
        max_snapshot_chars=section.max_snapshot_chars or DEFAULT_MAX_SNAPSHOT_CHARS,
    )
