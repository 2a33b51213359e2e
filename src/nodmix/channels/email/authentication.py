"""Whether the receiving mail server vouches for the `From` domain: its
`Authentication-Results` field (RFC 8601), read with the `authres` parser.

A sender can write any `Authentication-Results` field into a message; only the ones the
mailbox's own server added count. Those are the fields whose authserv-id is listed in
`channels.email.authentication.authservIds`; with none listed, the topmost field (servers add
theirs above everything that came with the message). A mail passes when DMARC passes for the
`From` domain, or, without a DMARC verdict, when DKIM or SPF passes for a domain aligned with
it (the same domain, or one a parent of the other). `mode`:

- `auto` (default): check whenever the server adds results (with `authservIds` set, a mail
  without a result from those servers is refused); mail without any results is accepted.
- `require`: a mail without a passing result is refused.
- `off`: no check (anyone can write any `From`).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Literal

import authres

AuthMode = Literal["auto", "require", "off"]
_FEATURES = authres.all_features()
_FAILED = frozenset({"fail", "quarantine", "reject"})


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Resolved `channels.email.authentication`."""

    mode: AuthMode = "auto"
    authserv_ids: frozenset[str] = frozenset()


def check_sender(msg: EmailMessage, domain: str, policy: AuthPolicy) -> str | None:
    """Why the mail cannot be trusted to come from `domain`, or None when it can (or when the
    policy does not ask)."""
    if policy.mode == "off":
        return None
    results = _trusted_results(msg, policy)
    if results is None:
        if policy.mode == "require" or policy.authserv_ids:
            return "no Authentication-Results from the receiving server"
        return None
    return _verdict(results, domain.lower())


def _trusted_results(msg: EmailMessage, policy: AuthPolicy) -> list[Any] | None:
    """The results of the fields the receiving server added; None when it added none."""
    fields = _fields(msg)
    if not fields:
        return None
    if not policy.authserv_ids:
        try:
            return list(_FEATURES.parse_value(fields[0]).results)  # the topmost field only
        except authres.AuthResError:
            return []  # unreadable: nothing vouches for the sender
    found: list[Any] | None = None
    for raw in fields:
        try:
            header = _FEATURES.parse_value(raw)
        except authres.AuthResError:
            continue
        if str(header.authserv_id or "").lower() in policy.authserv_ids:
            found = [*(found or []), *header.results]
    return found


def _fields(msg: EmailMessage) -> list[str]:
    """The raw, unfolded `Authentication-Results` values, topmost first."""
    out = []
    for name, value in msg.raw_items():
        if name.lower() == "authentication-results":
            out.append(" ".join(str(value).split()))
    return out


def _verdict(results: list[Any], domain: str) -> str | None:
    by_method: dict[str, list[Any]] = {}
    for result in results:
        by_method.setdefault(str(getattr(result, "method", "")).lower(), []).append(result)
    dmarc = {
        str(r.result).lower()
        for r in by_method.get("dmarc", [])
        if _about(r, "header", "from", domain)
    }
    if dmarc & _FAILED:
        return "DMARC failed for the From domain"
    if "pass" in dmarc:
        return None
    for method, kind, prop in (("dkim", "header", "d"), ("spf", "smtp", "mailfrom")):
        for result in by_method.get(method, []):
            if str(result.result).lower() == "pass" and _about(result, kind, prop, domain):
                return None
    return "sender not authenticated"  # a fixed reason: status counts stay bounded


def _about(result: Any, kind: str, name: str, domain: str) -> bool:
    """Whether the result's `kind.name` property names `domain` (aligned: equal, or one a
    subdomain of the other)."""
    for prop in getattr(result, "properties", []) or []:
        if prop.type == kind and prop.name == name and prop.value:
            value = str(prop.value).lower().rsplit("@", 1)[-1].strip(".")
            if value and (
                value == domain or domain.endswith("." + value) or value.endswith("." + domain)
            ):
                return True
    return False
