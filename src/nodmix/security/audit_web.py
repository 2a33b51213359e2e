"""Security audit checks of the web tools: the browser's reach into the local network, a
remote browser the guard cannot pin, and why `web_search` is not offered."""

from __future__ import annotations

from nodmix.security.findings import AuditInputs, Finding


def check_browser(inputs: AuditInputs) -> list[Finding]:
    """The browser allowed onto private addresses, or driven remotely."""
    browser = inputs.config.tools.browser
    if browser is None or not browser.enabled:
        return []
    found: list[Finding] = []
    if browser.allow_private_network:
        found.append(
            Finding(
                id="browser.private-network",
                severity="medium",
                title="the browser may reach loopback, link-local and private addresses",
                detail="a page (or a page's script) can make the browser call the gateway, "
                "routers or cloud metadata services and show the model what they answer.",
                fix="remove tools.browser.allowPrivateNetwork; list the hosts you need in "
                "tools.browser.allowHosts instead",
            )
        )
    if browser.allow_hosts:
        found.append(
            Finding(
                id="browser.allow-hosts",
                severity="low",
                title="pages may reach " + ", ".join(browser.allow_hosts) + " on any address",
                detail="listed hosts skip the private-address check (by name).",
                fix="keep tools.browser.allowHosts to hosts you trust pages to reach",
            )
        )
    if browser.cdp_url:
        found.append(
            Finding(
                id="browser.remote",
                severity="low",
                title="the remote browser resolves names itself",
                detail="with tools.browser.cdpUrl Nodmix checks each request's host, but the "
                "browser connects by its own DNS lookup, so a rebinding name can slip past.",
                fix="run the remote browser on a network without access to your LAN",
            )
        )
    return found


def check_web_search(inputs: AuditInputs) -> list[Finding]:
    """Why a configured `web_search` is not offered (a provider without its key, a key
    variable that is not set). An install without `tools.web.search` is not a finding:
    `nodmix doctor` says there that no provider is set."""
    from nodmix.search.settings import SearchUnavailable, resolve_search

    web = inputs.config.tools.web
    if web is None or web.search is None:
        return []
    found = resolve_search(inputs.config.tools, inputs.env)
    if not isinstance(found, SearchUnavailable):
        return []
    return [
        Finding(
            id="webSearch.off",
            severity="low",
            title="web_search is not offered",
            detail=found.reason,
            fix="configure tools.web.search (docs/web.md), or ignore this if you do not want it",
        )
    ]
