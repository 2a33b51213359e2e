"""How XMPP stanzas and Mattermost events become messages: who the sender is, when the bot
counts as mentioned, and what the layer never sees."""

from __future__ import annotations

import json

import pytest

from nodmix.channels.mattermost.mapping import mentions_name, posted_inbound, strip_name
from nodmix.channels.xmpp.mapping import chat_inbound, mentions, room_inbound, strip_address
from nodmix.config.channel_xmpp_mm import MattermostConfig, XmppConfig
from nodmix.errors import ConfigError

BOT = "bot00000000000000000000000"


def test_a_direct_chat_is_keyed_by_the_bare_jid_whatever_the_device() -> None:
    msg = chat_inbound(
        channel="xmpp", sender="Ann@Example.org/phone", body=" hi ", stanza_id="a1", own_jid="b@x"
    )
    assert msg is not None
    assert (msg.chat_id, msg.sender_id, msg.text, msg.chat_type) == (
        "ann@example.org",
        "ann@example.org",
        "hi",
        "dm",
    )
    assert (
        chat_inbound(channel="xmpp", sender="b@x/r", body="me", stanza_id="", own_jid="b@x") is None
    )
    assert (
        chat_inbound(channel="xmpp", sender="a@x/r", body="  ", stanza_id="", own_jid="b@x") is None
    )


def test_a_room_sender_is_the_real_jid_when_shown_and_the_room_nick_otherwise() -> None:
    known = room_inbound(
        channel="xmpp",
        room="Lounge@conf.x",
        nick="ann",
        own_nick="nodbot",
        body="nodbot: what time is it",
        stanza_id="1",
        real_jid="ann@x/laptop",
    )
    assert known is not None and known.sender_id == "ann@x" and known.mentioned
    assert known.text == "what time is it" and known.chat_id == "lounge@conf.x"
    hidden = room_inbound(
        channel="xmpp",
        room="lounge@conf.x",
        nick="eve",
        own_nick="nodbot",
        body="hello all",
        stanza_id="2",
        real_jid=None,
    )
    assert hidden is not None and hidden.sender_id == "lounge@conf.x/eve" and not hidden.mentioned
    assert (
        room_inbound(
            channel="xmpp",
            room="lounge@conf.x",
            nick="nodbot",
            own_nick="nodbot",
            body="my own reply",
            stanza_id="3",
            real_jid=None,
        )
        is None
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [("nodbot: hi", True), ("hey @NodBot", True), ("nodbotter", False), ("xnodbot", False)],
)
def test_a_nick_counts_only_as_a_whole_word(text: str, named: bool) -> None:
    assert mentions(text, "nodbot") is named
    assert mentions_name(text.replace("nodbot", "@nodbot").replace("@@", "@"), "nodbot") is (
        named or text == "nodbot: hi"
    )
    assert strip_address("nodbot, hi there", "nodbot") == "hi there"
    assert strip_name("@nodbot: hi there", "nodbot") == "hi there"


def _posted(post: dict[str, object], kind: str = "O", mentions: list[str] | None = None) -> dict:
    data = {"channel_type": kind, "sender_name": "@ann", "post": json.dumps(post)}
    if mentions is not None:
        data["mentions"] = json.dumps(mentions)
    return {"event": "posted", "data": data}


def test_mattermost_posts_become_messages_and_the_bots_own_and_system_posts_do_not() -> None:
    post = {"id": "p1", "user_id": "u-ann", "channel_id": "c-town", "message": "@nodbot hi"}
    found = posted_inbound(
        _posted({**post, "root_id": "p0"}, mentions=[BOT]),
        channel="mattermost",
        bot_id=BOT,
        bot_username="nodbot",
    )
    assert found is not None
    msg, where, _created = found
    assert (msg.chat_id, msg.thread_id, msg.text, msg.mentioned, where) == (
        "c-town",
        "p0",
        "hi",
        True,
        "c-town",
    )
    direct = posted_inbound(
        _posted({**post, "message": "hello"}, kind="D"),
        channel="mattermost",
        bot_id=BOT,
        bot_username="nodbot",
    )
    assert direct is not None and direct[0].chat_id == "u-ann" and direct[0].chat_type == "dm"
    for ignored in (
        {**post, "user_id": BOT},
        {**post, "type": "system_join_channel"},
        {**post, "props": {"from_bot": "true"}},
    ):
        assert posted_inbound(_posted(ignored), channel="m", bot_id=BOT, bot_username="x") is None


def test_settings_name_the_key_that_is_wrong() -> None:
    from nodmix.channels.mattermost.adapter import mattermost_settings
    from nodmix.channels.xmpp.adapter import xmpp_settings

    with pytest.raises(ConfigError, match="bare JID"):
        xmpp_settings(XmppConfig(jid="not-a-jid", password="x"), {})
    with pytest.raises(ConfigError, match="XMPP_PASSWORD"):
        xmpp_settings(XmppConfig(jid="bot@example.org"), {})
    assert xmpp_settings(XmppConfig(jid="bot@example.org"), {"XMPP_PASSWORD": "p"}).nick == "bot"
    with pytest.raises(ConfigError, match="sub-path"):
        mattermost_settings(MattermostConfig(url="https://x.org/chat", token="t"), {})
    with pytest.raises(ConfigError, match="MATTERMOST_TOKEN"):
        mattermost_settings(MattermostConfig(url="https://x.org"), {})
    settings = mattermost_settings(MattermostConfig(url="https://x.org"), {"MATTERMOST_TOKEN": "t"})
    assert (settings.scheme, settings.host, settings.port) == ("https", "x.org", 443)
