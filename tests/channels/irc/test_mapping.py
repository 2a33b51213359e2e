"""IRC PRIVMSGs as inbound messages: DMs, channels, mentions, formatting."""

from __future__ import annotations

from nodmix.channels.irc.mapping import mentions, to_inbound


def test_a_private_message_is_a_dm_from_the_nick() -> None:
    msg = to_inbound(
        channel="irc", own_nick="nodbot", source="Ann!ann@h", target="nodbot", text="hi"
    )
    assert msg is not None
    assert (msg.chat_type, msg.chat_id, msg.sender_id, msg.sender_mask) == (
        "dm",
        "Ann",
        "ann",
        "Ann!ann@h",
    )


def test_a_channel_message_names_the_bot_only_as_a_whole_word() -> None:
    assert mentions("nodbot: hi", "nodbot")
    assert mentions("hey NodBot, hi", "nodbot")
    assert not mentions("nodbots are great", "nodbot")
    assert not mentions("the_nodbot thing", "nodbot")
    msg = to_inbound(
        channel="irc", own_nick="nodbot", source="a!b@c", target="#Room", text="nodbot: hi"
    )
    assert msg is not None
    assert (msg.chat_type, msg.chat_id, msg.mentioned, msg.text) == ("group", "#room", True, "hi")


def test_formatting_codes_are_removed_and_actions_kept_while_other_ctcp_is_dropped() -> None:
    msg = to_inbound(
        channel="irc", own_nick="b", source="a!b@c", target="b", text="\x02bold\x02 \x0304red"
    )
    assert msg is not None and msg.text == "bold red"
    action = to_inbound(
        channel="irc", own_nick="b", source="a!b@c", target="b", text="\x01ACTION waves\x01"
    )
    assert action is not None and action.text == "* a waves"
    assert (
        to_inbound(channel="irc", own_nick="b", source="a!b@c", target="b", text="\x01VERSION\x01")
        is None
    )


def test_messages_from_the_server_or_the_bot_itself_are_not_handled() -> None:
    assert (
        to_inbound(channel="irc", own_nick="b", source="irc.example", target="b", text="x") is None
    )
    assert to_inbound(channel="irc", own_nick="b", source="B!b@c", target="#r", text="x") is None


def test_naming_the_configured_nick_counts_while_the_bot_has_a_fallback_one() -> None:
    msg = to_inbound(
        channel="irc",
        own_nick="nodbot_",
        alt_nick="nodbot",
        source="a!b@c",
        target="#r",
        text="nodbot: still there?",
    )
    assert msg is not None and msg.mentioned and msg.text == "still there?"
