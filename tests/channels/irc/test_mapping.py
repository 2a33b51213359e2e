"""IRC PRIVMSGs as inbound messages: DMs, channels, mentions, formatting."""

from __future__ import annotations

from typing import Any

from nodmix.channels.irc.mapping import identity, mentions, to_inbound


def test_a_private_message_is_a_dm_from_the_whole_mask_never_the_nick() -> None:
    msg = to_inbound(
        channel="irc", own_nick="nodbot", source="Ann!ann@H.example", target="nodbot", text="hi"
    )
    assert msg is not None
    assert (msg.chat_type, msg.chat_id, msg.sender_id, msg.sender_mask) == (
        "dm",
        "ann!ann@h.example",
        "ann!ann@h.example",
        "Ann!ann@H.example",
    )


def test_a_services_account_is_the_sender_whatever_the_nick() -> None:
    one = to_inbound(
        channel="irc", own_nick="b", source="Ann!x@h", target="b", text="hi", account="Ann"
    )
    two = to_inbound(
        channel="irc", own_nick="b", source="Ann_away!y@g", target="b", text="hi", account="ann"
    )
    assert one is not None and two is not None
    assert one.sender_id == two.sender_id == "account:ann"
    assert one.chat_id == "ann!x@h"  # replies still go to the nick that wrote


def test_a_nick_change_or_a_new_host_is_a_new_sender() -> None:
    ids = {
        identity(source)
        for source in ("ann!u@h", "ann_!u@h", "ann!v@h", "ann!u@g", "ANN!u@h", "Ann!U@H")
    }
    assert len(ids) == 4
    assert identity("ann!u@2001:db8::1") == "ann!u@2001:0db8:0000:0000:0000:0000:0000:0001"


def test_an_account_the_server_did_not_give_is_ignored() -> None:
    bads: list[Any] = ["*", "0", "", "a b", "ann!x", "x@y", "a:b", True, None]
    for bad in bads:
        msg = to_inbound(
            channel="irc", own_nick="b", source="ann!u@h", target="b", text="hi", account=bad
        )
        assert msg is not None and msg.sender_id == "ann!u@h"


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
