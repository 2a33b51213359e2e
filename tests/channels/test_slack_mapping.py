"""Slack event shapes as channel messages, and Markdown replies as mrkdwn."""

from __future__ import annotations

from typing import Any

import pytest

from nodmix.channels.slack.mapping import to_inbound, to_mrkdwn

BOT = "U0BOT"


def _event(**extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "C1",
        "user": "U7",
        "text": "hello",
        "ts": "100.1",
        "channel_type": "channel",
        **extra,
    }


def test_a_channel_message_is_a_group_message_keyed_by_channel() -> None:
    msg = to_inbound(_event(), channel="slack", bot_user=BOT)
    assert msg is not None
    assert (msg.chat_type, msg.chat_id, msg.sender_id, msg.message_id) == (
        "group",
        "C1",
        "U7",
        "100.1",
    )
    assert msg.mentioned is False and msg.thread_id is None


def test_a_direct_message_is_keyed_by_the_sender() -> None:
    msg = to_inbound(_event(channel="D9", channel_type="im"), channel="slack", bot_user=BOT)
    assert msg is not None
    assert (msg.chat_type, msg.chat_id, msg.mentioned) == ("dm", "U7", True)


def test_a_mention_is_detected_and_removed_and_escapes_are_undone() -> None:
    text = f"<@{BOT}> is 1 &lt; 2 &amp;&amp; see <https://a.example/x|the page>"
    msg = to_inbound(_event(text=text), channel="slack", bot_user=BOT)
    assert msg is not None and msg.mentioned
    assert msg.text == "is 1 < 2 && see the page (https://a.example/x)"


def test_a_thread_reply_carries_the_root_and_a_reply_under_the_bot_counts_as_mention() -> None:
    event = _event(ts="100.5", thread_ts="100.1", parent_user_id=BOT)
    msg = to_inbound(event, channel="slack", bot_user=BOT)
    assert msg is not None
    assert msg.thread_id == "100.1" and msg.mentioned
    root = to_inbound(_event(thread_ts="100.1", ts="100.1"), channel="slack", bot_user=BOT)
    assert root is not None and root.thread_id is None


@pytest.mark.parametrize(
    "extra",
    [
        {"subtype": "message_changed"},
        {"subtype": "channel_join"},
        {"bot_id": "B1"},
        {"user": BOT},
        {"user": None},
    ],
)
def test_edits_joins_bots_and_the_bot_itself_are_not_messages(extra: dict[str, Any]) -> None:
    assert to_inbound(_event(**extra), channel="slack", bot_user=BOT) is None


def test_shared_files_become_attachments() -> None:
    files = [{"name": "a.png", "mimetype": "image/png", "url_private_download": "https://f/a"}]
    msg = to_inbound(_event(subtype="file_share", files=files), channel="slack", bot_user=BOT)
    assert msg is not None
    assert [(a.kind, a.ref, a.name) for a in msg.attachments] == [("photo", "https://f/a", "a.png")]


def test_markdown_becomes_mrkdwn_with_slack_escapes() -> None:
    markdown = "# Plan\n**bold**, ~~gone~~, [site](https://a.example/?x=1&y=2), 1 < 2\n> quoted"
    assert to_mrkdwn(markdown) == (
        "*Plan*\n*bold*, ~gone~, <https://a.example/?x=1&amp;y=2|site>, 1 &lt; 2\n> quoted"
    )


def test_code_blocks_keep_their_text() -> None:
    assert to_mrkdwn("```\na **b** < c\n```") == "```\na **b** &lt; c\n```"


def test_slash_commands_carry_chat_commands_or_prompts() -> None:
    from nodmix.channels.slack.mapping import command_inbound

    def text(command: str, args: str, where: str = "D1") -> str | None:
        payload = {"user_id": "U7", "channel_id": where, "command": command, "text": args}
        msg = command_inbound(payload, channel="slack")
        return None if msg is None else msg.text

    assert text("/nodmix", "new") == "/new"
    assert text("/nodmix", "/status") == "/status"
    assert text("/status", "") == "/status"
    assert text("/nodmix", "what is on today?") == "what is on today?"
    assert text("/nodmix", "") is None
    payload = {"user_id": "U7", "channel_id": "C5", "command": "/nodmix", "text": "hi"}
    msg = command_inbound(payload, channel="slack")
    assert msg is not None and (msg.chat_type, msg.chat_id, msg.mentioned) == ("group", "C5", True)
