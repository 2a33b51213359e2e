"""Links shared over XMPP: what becomes an attachment, and which links the bot refuses to
fetch (another host's private address, anything but http(s))."""

from __future__ import annotations

import re

import anyio
import pytest

from nodmix.channels.links import LinkRefused, check_link
from nodmix.channels.xmpp.files import link_attachment
from nodmix.channels.xmpp.mapping import chat_inbound

OWN = frozenset({("https", "upload.example.org", 443), ("http", "10.0.0.5", 5280)})
"""The origins of the own server's upload service (as its slots name them)."""


def test_a_shared_link_is_the_attachment_and_not_the_text() -> None:
    url = "https://upload.example.org/abc/Holiday%20photo.JPG"
    msg = chat_inbound(
        channel="xmpp",
        sender="ann@example.org/phone",
        body=url,
        stanza_id="s1",
        own_jid="bot@example.org/x",
        links=(url,),
    )
    assert msg is not None and msg.text == ""
    (attachment,) = msg.attachments
    assert (attachment.kind, attachment.name, attachment.ref) == ("photo", "Holiday photo.JPG", url)
    assert link_attachment("https://h.example/v/voice.m4a").kind == "voice"
    assert link_attachment("https://h.example/doc").kind == "document"


@pytest.mark.parametrize(
    "url",
    [
        "https://upload.example.org/f/a.png",  # the upload service
        "http://10.0.0.5:5280/f/a.png",  # the upload service, on a private address
        "https://93.184.215.14/a.png",  # a public address
    ],
)
def test_links_to_the_own_server_or_public_hosts_are_fetched(url: str) -> None:
    anyio.run(check_link, url, OWN)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8080/admin", "private address"),
        ("http://169.254.169.254/latest/meta-data", "private address"),
        ("http://[::1]/x", "private address"),
        ("http://10.0.0.5:22/x", "private address"),  # the server's host, another port
        ("https://10.0.0.5:5280/x", "private address"),  # the upload port, another scheme
        ("file:///etc/passwd", "not an http(s) link"),
        ("ftp://example.org/a", "not an http(s) link"),
    ],
)
def test_links_to_other_private_addresses_or_other_schemes_are_refused(url: str, why: str) -> None:
    with pytest.raises(LinkRefused, match=re.escape(why)):
        anyio.run(check_link, url, OWN)
