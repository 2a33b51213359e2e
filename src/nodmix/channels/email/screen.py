"""Which inbound mail the email channel may hand on: who sent it, read strictly, and whether a
robot sent it.

The sender is the one address of the one `From` field, parsed by the standard library's
RFC 5322 header parser and refused at its first defect: a header a lenient parser reads as
`ann@example.org` while a mail client shows someone else (`<ann@example.org>@evil.example`,
`ann@example.org, Eve <eve@evil.example>`, `ann@example.org)<eve@evil.example>`, folded or
encoded variants, non-ASCII look-alikes) is refused whole. Automatic mail (RFC 3834
`Auto-Submitted`, the common vendor auto-reply headers, null return paths, list mail,
bounces and delivery reports) is never answered, so the agent never talks to a robot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.message import EmailMessage

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")
_ROBOT = re.compile(
    r"(?i)(mailer-daemon|postmaster|no-?reply|do-?not-?reply|bounces?|autoreply|auto-reply)"
    r"([+-].*)?|.*[+-]bounces?([+-].*)?"
)
_AUTO_SUBJECT = re.compile(
    r"(?i)\s*(auto(matic)? ?reply|auto-?response|out of (the )?office|undeliverable|"
    r"undelivered mail|delivery status notification|mail delivery (failed|failure)|"
    r"returned mail|abwesenheitsnotiz|r[ée]ponse automatique)\b"
)
_LIST_HEADERS = ("List-Id", "List-Unsubscribe", "List-Post", "List-Help", "List-Owner")
_AUTO_REPLY_HEADERS = ("X-Autoreply", "X-Autorespond", "X-Auto-Reply", "X-Autoresponder")


@dataclass(frozen=True, slots=True)
class Sender:
    """The one strictly parsed `From` address (lower case) and its display name."""

    address: str
    name: str = ""

    @property
    def domain(self) -> str:
        return self.address.rsplit("@", 1)[1]


def sender_of(msg: EmailMessage) -> Sender | str:
    """The sender, or why the `From` field cannot be trusted to name one."""
    fields = msg.get_all("From") or []
    if len(fields) != 1:
        return "no From field" if not fields else "several From fields"
    header = fields[0]
    defects = getattr(header, "defects", ())
    groups = getattr(header, "groups", None)
    if defects or groups is None:
        return "malformed From field"
    if len(groups) != 1 or groups[0].display_name is not None or len(groups[0].addresses) != 1:
        return "a From field with more than one address"
    address = groups[0].addresses[0]
    local, domain = address.username, address.domain
    if not _LOCAL.fullmatch(local) or not _DOMAIN.fullmatch(domain) or len(domain) > 253:
        return "a From address that is not a plain ASCII mailbox"
    name = " ".join(str(address.display_name).split())
    if "@" in name or "<" in name or not name.isprintable():
        name = ""  # a display name dressed up as an address names nobody
    return Sender(f"{local}@{domain}".lower(), name[:100])


def is_automatic(msg: EmailMessage, sender: Sender, own_address: str) -> str | None:
    """Why `msg` must not be answered (a robot, a list, a bounce, our own mail), or None."""
    if sender.address == own_address.lower():
        return "sent by this mailbox"
    if _ROBOT.fullmatch(sender.address.rsplit("@", 1)[0]):
        return "automatic sender"
    auto = _value(msg, "Auto-Submitted")
    if auto and auto != "no":
        return "auto-submitted"
    if any(msg.get(name) is not None for name in _AUTO_REPLY_HEADERS):
        return "auto-reply"
    suppress = _value(msg, "X-Auto-Response-Suppress")
    if suppress and suppress != "none":
        return "auto-reply suppressed"
    if _value(msg, "Precedence") in ("bulk", "junk", "list", "auto_reply"):
        return "bulk mail"
    if any(msg.get(name) is not None for name in _LIST_HEADERS):
        return "mailing list"
    return _bounce(msg) or _looped(msg, own_address)


def _bounce(msg: EmailMessage) -> str | None:
    """Delivery reports, null return paths and the subjects autoresponders use."""
    for path in msg.get_all("Return-Path") or []:
        if str(path).strip() in ("<>", ""):
            return "null return path"
    if msg.get_content_type() == "multipart/report" or msg.get("X-Failed-Recipients"):
        return "delivery report"
    if _AUTO_SUBJECT.match(str(msg.get("Subject", ""))):
        return "automatic subject"
    return None


def _looped(msg: EmailMessage, own_address: str) -> str | None:
    loops = " ".join(str(v) for v in msg.get_all("X-Loop") or []).lower()
    return "mail loop" if own_address.lower() in loops else None


def _value(msg: EmailMessage, name: str) -> str:
    """A header's value, unfolded, lower case ('' when absent or unreadable)."""
    try:
        value = msg.get(name)
    except (ValueError, IndexError):  # a header the parser cannot read is still present
        return "unreadable"
    return " ".join(str(value).split()).lower() if value is not None else ""
