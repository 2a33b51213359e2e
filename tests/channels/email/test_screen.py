"""Which mail the email channel hands on: one strictly parsed From address, no robots."""

from __future__ import annotations

import pytest

from nodmix.channels.email.mapping import parse
from nodmix.channels.email.screen import Sender, is_automatic, sender_of

OWN = "agent@nodmix.test"


def _raw(*headers: str, body: str = "hi", content_type: str = "text/plain") -> bytes:
    lines = [*headers, "To: agent@nodmix.test", "Subject: Ferry", f"Content-Type: {content_type}"]
    return ("\r\n".join(lines) + "\r\n\r\n" + body + "\r\n").encode("utf-8")


def _sender(from_value: str) -> Sender | str:
    return sender_of(parse(_raw(f"From: {from_value}")))


@pytest.mark.parametrize(
    "value",
    [
        "<ann@example.org>@evil.example",
        "ann@example.org, Eve <eve@evil.example>",
        "ann@example.org)<eve@evil.example>",
        "ann@example.org <eve@evil.example>",
        "ann@example.org\r\n <eve@evil.example>",
        "Ann <ann@example.org",
        '"ann@example.org"@evil.example',
        "ann@exаmple.org",  # Cyrillic а
        "ann＠example.org",  # fullwidth at sign
        "ann@example.org\x00",
        "undisclosed: ann@example.org;",
        "<@evil.example:ann@example.org>",
        "ann@@example.org",
        "ann@-example.org",
        "<>",
        "",
        "=?utf-8?q?ann=40example.org?=",
        "ann@example.org (x) <eve@evil.example>",
        "Ann <ann@example.org>, ",
        "a\u200b@example.org",  # a zero-width space
        "ann@example.org.",
        "ann@[127.0.0.1]",
    ],
)
def test_a_from_field_a_lenient_parser_would_misread_is_refused(value: str) -> None:
    assert isinstance(_sender(value), str)


def test_several_from_fields_are_refused() -> None:
    mail = parse(_raw("From: ann@example.org", "From: eve@evil.example"))
    assert sender_of(mail) == "several From fields"


@pytest.mark.parametrize(
    ("value", "address", "name"),
    [
        ("Ann Example <Ann@Example.org>", "ann@example.org", "Ann Example"),
        ("ann@example.org (Ann)", "ann@example.org", ""),
        ('"Ann, the owner" <ann@example.org>', "ann@example.org", "Ann, the owner"),
        ("=?utf-8?q?J=C3=B6rg?= <jorg@example.org>", "jorg@example.org", "Jörg"),
        ('"ann@example.org" <eve@evil.example>', "eve@evil.example", ""),
        ("=?utf-8?q?ann@example.org?= <eve@evil.example>", "eve@evil.example", ""),
        ("Ann\r\n <ann@example.org>", "ann@example.org", "Ann"),
    ],
)
def test_a_plain_address_is_read_and_an_address_like_display_name_is_dropped(
    value: str, address: str, name: str
) -> None:
    assert _sender(value) == Sender(address, name)


def _automatic(*headers: str, sender: str = "ann@example.org") -> str | None:
    mail = parse(_raw(f"From: {sender}", *headers))
    found = sender_of(mail)
    assert isinstance(found, Sender)
    return is_automatic(mail, found, OWN)


@pytest.mark.parametrize(
    "header",
    [
        "Auto-Submitted: auto-replied",
        "Auto-Submitted: auto-generated",
        "X-Autoreply: yes",
        "X-Autorespond: Out of office",
        "Precedence: auto_reply",
        "Precedence: bulk",
        "Precedence: junk",
        "Precedence: list",
        "X-Auto-Response-Suppress: All",
        "X-Auto-Response-Suppress: OOF, AutoReply",
        "Return-Path: <>",
        "List-Id: <ferries.lists.example.org>",
        "List-Unsubscribe: <mailto:leave@lists.example.org>",
        "X-Failed-Recipients: bob@example.org",
        "X-Loop: agent@nodmix.test",
    ],
)
def test_automatic_mail_is_never_answered(header: str) -> None:
    assert _automatic(header) is not None


@pytest.mark.parametrize(
    "sender",
    [
        "MAILER-DAEMON@example.org",
        "bounces@example.org",
        "bounce+ann=example.org@mail.example.org",
        "ferries-bounces@lists.example.org",
        "no-reply@example.org",
        "donotreply@example.org",
        "postmaster@example.org",
    ],
)
def test_robot_senders_are_never_answered(sender: str) -> None:
    assert _automatic(sender=sender) == "automatic sender"


def test_bounces_and_autoresponder_subjects_are_never_answered() -> None:
    report = parse(
        _raw(
            "From: ann@example.org",
            content_type='multipart/report; report-type=delivery-status; boundary="b"',
            body="--b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--b--",
        )
    )
    sender = sender_of(report)
    assert isinstance(sender, Sender)
    assert is_automatic(report, sender, OWN) == "delivery report"
    for subject in ("Automatic reply: Ferry", "Out of Office: Ferry", "Undeliverable: Ferry"):
        mail = parse(_raw("From: ann@example.org").replace(b"Ferry", subject.encode(), 1))
        found = sender_of(mail)
        assert isinstance(found, Sender) and is_automatic(mail, found, OWN) is not None


def test_a_person_and_harmless_headers_are_answered() -> None:
    assert _automatic() is None
    assert _automatic("Auto-Submitted: no") is None
    assert _automatic("X-Auto-Response-Suppress: None") is None
    assert _automatic("Return-Path: <ann@example.org>") is None
    assert _automatic(sender=OWN) == "sent by this mailbox"
