"""Each channel tells a direct chat from a group by its id where the platform can; where it
cannot the answer is `unknown`, which delivery treats as a group until seen as direct."""

from __future__ import annotations

import pytest

from nodmix.channels.chat_kinds import chat_kind
from nodmix.config.loader import validate


@pytest.mark.parametrize(
    ("channel", "chat_id", "kind"),
    [
        ("telegram", "4242", "direct"),
        ("telegram", "-1001234", "group"),
        ("telegram", "@news", "group"),
        ("slack", "U0123", "direct"),
        ("slack", "D0123", "direct"),
        ("slack", "C0123", "group"),
        ("slack", "G0123", "group"),
        ("matrix", "@ann:example.org", "direct"),
        ("matrix", "!room:example.org", "unknown"),
        ("irc", "#ops", "group"),
        ("irc", "&local", "group"),
        ("irc", "ann", "direct"),
        ("email", "ann@example.org", "direct"),
        ("signal", "+4915112345678", "direct"),
        ("signal", "0d6c8e3a-54b1-4b8e-9f39-7b5f1d2c9a10", "direct"),
        ("signal", "kM3xQ0bS0Vb3Yw8mU3tq1sP1n8w2l0Yk4fJ9cH2aZ5E=", "group"),
        ("whatsapp", "4915112345678", "direct"),
        ("whatsapp", "US.1234567", "direct"),
        ("whatsapp", "Y2FtcGFpZ24tZ3JvdXA", "group"),
        ("msteams", "29:1abc", "direct"),
        ("msteams", "0d6c8e3a-54b1-4b8e-9f39-7b5f1d2c9a10", "direct"),
        ("msteams", "19:abc@thread.tacv2", "group"),
        ("googlechat", "users/123", "direct"),
        ("googlechat", "spaces/AAAA", "group"),
        ("xmpp", "ann@example.org", "direct"),
        ("xmpp", "ops@conference.example.org", "group"),
        ("xmpp", "other@conference.example.org", "group"),
        ("xmpp", "ops@conference.example.org/ann", "group"),
        ("discord", "123456789012345678", "unknown"),
        ("mattermost", "k1d9x3m7gbf8jqz5r6w4y2c0ta", "unknown"),
    ],
)
def test_chat_ids_say_direct_group_or_unknown(channel: str, chat_id: str, kind: str) -> None:
    rooms = ["ops@conference.example.org"]
    xmpp = {"jid": "bot@example.org", "rooms": rooms}
    config = validate({"channels": {"xmpp": xmpp}}, file="nodmix.json")
    assert chat_kind(config, channel, chat_id) == kind
