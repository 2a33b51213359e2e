"""`nodmix doctor`'s web checks: whether `web_search` is offered (and why not), and whether the
browser tool can start (Playwright installed, Chromium present)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from nodmix.cli.doctor_channels import Finding
from nodmix.extras import install_line

_EXTRA_MODULES = {"tavily": "tavily", "linkup": "linkup"}


def web_findings(config: Any) -> list[Finding]:
    """One line for `web_search`, one for the browser."""
    return [_search(config), _browser(config)]


def _search(config: Any) -> Finding:
    from nodmix.search.settings import SearchUnavailable, resolve_search

    found = resolve_search(config.tools, dict(os.environ))
    if isinstance(found, SearchUnavailable):
        configured = config.tools.web is not None and config.tools.web.search is not None
        reason = f"not offered: {found.reason}"
        if configured:
            return ("web_search", "warn", reason, "see docs/web.md")
        return ("web_search", "ok", reason, None)
    module = _EXTRA_MODULES.get(found.provider)
    if module is not None and importlib.util.find_spec(module) is None:
        return (
            "web_search",
            "error",
            f"{found.provider} needs its client library",
            install_line(found.provider),
        )
    return ("web_search", "ok", f"{found.provider} at {found.base_url}", None)


def _browser(config: Any) -> Finding:
    from nodmix.browser.settings import resolve_browser

    settings = resolve_browser(config.tools.browser)
    if settings is None:
        return ("browser", "ok", "not offered (tools.browser.enabled is not true)", None)
    if importlib.util.find_spec("playwright") is None:
        return ("browser", "error", "Playwright is not installed", install_line("browser"))
    guard = (
        "pages may reach private addresses"
        if settings.policy.allow_private
        else "private addresses blocked"
    )
    if settings.cdp_url:
        return ("browser", "ok", f"remote browser at {settings.cdp_url} ({guard})", None)
    if not Path(settings.executable_path).exists():
        return (
            "browser",
            "error",
            f"Chromium not found at {settings.executable_path}",
            "apt-get install chromium (or `make browser`), or set tools.browser.executablePath",
        )
    mode = "headless" if settings.headless else "with a window"
    return ("browser", "ok", f"Chromium {settings.executable_path}, {mode}, {guard}", None)
