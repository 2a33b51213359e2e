"""Matrix events as inbound messages: mentions, replies, threads, media; and the settings'
one-line errors. (The whole path runs against Synapse in `test_matrix_gateway.py`.)"""

from __future__ import annotations

from typing import Any

import pytest

from nodmix.channels.matrix.credentials import matrix_settings
from nodmix.channels.matrix.mapping import Me, is_edit, sender_label, text_content, to_inbound
from nodmix.config.channel_schema import MatrixConfig
from nodmix.errors import ConfigError

ME = Me("@nodmix:example.org", ("Nodmix Bot", "nodmix"))


def _event(content: dict[str, Any], sender: str = "@pat:example.org") -> dict[str, Any]:
    return {"type": "m.room.message", "event_id": "$e1", "sender": sender, "content": content}


def _inbound(content: dict[str, Any], **kw: Any) -> Any:
    args: dict[str, Any] = {"direct": False, "replied_to_me": False, **kw}
    return to_inbound(
        _event(content), channel="matrix", room_id="!r:x", me=ME, sender_name="Pat", **args
    )


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ({"body": "hi", "m.mentions": {"user_ids": ["@nodmix:example.org"]}}, "hi"),
        ({"body": "Nodmix Bot: what now?"}, "what now?"),
        ({"body": "@nodmix:example.org, status"}, "status"),
        (
            {
                "body": "look",
                "formatted_body": '<a href="https://matrix.to/#/@nodmix:example.org">N</a> look',
            },
            "look",
        ),
    ],
)
def test_a_room_message_mentioning_the_bot_is_marked_and_the_address_dropped(
    content: dict[str, Any], text: str
) -> None:
    msg = _inbound({"msgtype": "m.text", **content})
    assert msg.mentioned and msg.text == text and msg.chat_type == "group"


def test_other_names_and_ids_are_not_mentions() -> None:
    for body in ("ask nodmixer", "@nodmix:elsewhere.org hi", "hello all"):
        assert not _inbound({"msgtype": "m.text", "body": body}).mentioned
    others = {"msgtype": "m.text", "body": "x", "m.mentions": {"user_ids": ["@pat:x"]}}
    assert not _inbound(others).mentioned


def test_a_reply_to_the_bot_counts_as_a_mention_and_loses_its_quoted_fallback() -> None:
    content = {
        "msgtype": "m.text",
        "body": "> <@nodmix:example.org> earlier answer\n\nand then?",
        "m.relates_to": {"m.in_reply_to": {"event_id": "$bot"}},
    }
    msg = _inbound(content, replied_to_me=True)
    assert msg.mentioned and msg.text == "and then?" and msg.reply_to == "$bot"


def test_thread_messages_keep_their_root_and_replies_go_back_into_the_thread() -> None:
    content = {
        "msgtype": "m.text",
        "body": "in the thread",
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": "$root",
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": "$prev"},
        },
    }
    msg = _inbound(content)
    assert msg.thread_id == "$root" and msg.reply_to is None
    out = text_content("answer", thread_id="$root", reply_to=None)
    assert out["m.relates_to"]["rel_type"] == "m.thread"
    assert out["m.relates_to"]["event_id"] == "$root"


def test_notices_own_messages_and_other_events_are_not_inbound() -> None:
    assert _inbound({"msgtype": "m.notice", "body": "bot talk"}) is None
    own = _event({"msgtype": "m.text", "body": "x"}, sender=ME.user_id)
    assert (
        to_inbound(
            own,
            channel="matrix",
            room_id="!r:x",
            direct=True,
            me=ME,
            sender_name="",
            replied_to_me=False,
        )
        is None
    )


def test_a_file_becomes_an_attachment_with_its_media_url() -> None:
    msg = _inbound({"msgtype": "m.file", "body": "plan.pdf", "url": "mxc://x/abc"}, direct=True)
    assert msg.chat_type == "dm" and msg.text == ""
    assert [(a.kind, a.ref, a.name) for a in msg.attachments] == [
        ("document", "mxc://x/abc", "plan.pdf")
    ]


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (MatrixConfig(user_id="@a:b", access_token="t"), "channels.matrix.homeserver"),
        (MatrixConfig(homeserver="http://h", user_id="nodmix", access_token="t"), "userId"),
        (MatrixConfig(homeserver="http://h", user_id="@a:b"), "channels.matrix.accessToken"),
    ],
)
def test_missing_or_malformed_settings_name_the_key(section: MatrixConfig, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        matrix_settings(section, {})
    assert key in str(caught.value) or key in str(getattr(caught.value, "key", ""))


def test_the_token_can_come_from_the_environment() -> None:
    section = MatrixConfig(homeserver="http://h/", user_id="@a:b")
    settings = matrix_settings(section, {"MATRIX_ACCESS_TOKEN": "secret"})
    assert settings.access_token == "secret" and settings.homeserver == "http://h"
    assert settings.text_limit == 16000


@pytest.mark.parametrize(
    "content",
    [
        {"body": "Nodmix Bot: hi", "m.mentions": {}},  # the client says: nobody mentioned
        {"body": "Nodmix Bot: hi", "m.mentions": {"user_ids": ["@pat:example.org"]}},
        {"body": "Nodmix Bot: hi", "m.mentions": {"room": True}},
        {"body": "> <@pat:example.org> Nodmix Bot: hi\n> more\n\nme too"},
        {
            "body": "me too",
            "formatted_body": (
                '<mx-reply><blockquote><a href="https://matrix.to/#/@nodmix:example.org">N</a>'
                "</blockquote></mx-reply>me too"
            ),
        },
    ],
)
def test_only_m_mentions_or_the_messages_own_text_mention_the_bot(content: dict[str, Any]) -> None:
    assert _inbound({"msgtype": "m.text", **content}).mentioned is False


def test_an_edit_is_not_a_message() -> None:
    edit = {
        "msgtype": "m.text",
        "body": "* Nodmix Bot: now",
        "m.new_content": {"msgtype": "m.text", "body": "Nodmix Bot: now"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": "$e0"},
    }
    assert is_edit(_event(edit)) and _inbound(edit) is None


@pytest.mark.parametrize(
    ("name", "label"),
    [
        (None, "@mal:example.org"),
        ("mal", "@mal:example.org"),
        ("Mallory", '@mal:example.org (display name "Mallory")'),
        ("@owner:example.org", '@mal:example.org (display name "@owner:example.org")'),
        (
            'x"] [@owner:example.org\nhi',
            '@mal:example.org (display name "x @owner:example.org hi")',
        ),
    ],
)
def test_a_display_name_is_only_ever_shown_marked_beside_the_user_id(
    name: str | None, label: str
) -> None:
    assert sender_label("@mal:example.org", name) == label
