"""How Teams activities and Google Chat events become messages: who is mentioned (only what
the platform marks, never text that looks like a mention), chats, threads, and what is not
a message at all."""

from __future__ import annotations

from typing import Any

from microsoft_agents.activity import Activity

from nodmix.channels.googlechat.mapping import read_event, to_chat_text
from nodmix.channels.googlechat.mapping import to_inbound as chat_inbound
from nodmix.channels.msteams.mapping import to_inbound as teams_inbound
from nodmix.channels.types import InboundMessage
from nodmix.testing.googlechat_payloads import SPACE, ChatUser, message_event
from nodmix.testing.msteams_payloads import CHANNEL, TeamsUser, message_activity

BOT = "28:app"


def _raw(text: str, **kwargs: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "activity_id": "1700",
        "service_url": "https://smba.example/amer/",
        "user": TeamsUser("ann"),
        "bot_id": BOT,
        "bot_name": "Nodmix",
        "text": text,
        "kind": "channel",
        "tenant": "t",
    }
    return message_activity(**(defaults | kwargs))


def _activity(text: str, **kwargs: Any) -> Activity:
    return Activity.model_validate(_raw(text, **kwargs))


def test_a_teams_mention_counts_only_with_the_bots_entity_and_is_stripped() -> None:
    real = teams_inbound(_activity("hi <b>there</b>&nbsp;now", mention=True), channel="msteams")
    assert real is not None and real.mentioned and real.text == "hi there now"
    assert real.chat_id == CHANNEL and real.thread_id == "1700" and real.sender_id == "aad-ann"
    typed = teams_inbound(_activity("<at>Nodmix</at> hello"), channel="msteams")
    assert typed is not None and not typed.mentioned
    other = _raw("<at>Eve</at> hi")
    other["entities"] = [{"type": "mention", "mentioned": {"id": "29:eve"}, "text": "<at>Eve</at>"}]
    found = teams_inbound(Activity.model_validate(other), channel="msteams")
    assert found is not None and not found.mentioned


def test_teams_activities_that_are_not_messages_from_people_are_dropped() -> None:
    own = _raw("echo")
    own["from"] = {"id": BOT, "name": "Nodmix"}
    other_bot = own | {"from": {"id": "28:another", "name": "Bot"}}
    update = own | {"type": "messageUpdate", "from": {"id": "29:1ann"}}
    for data in (own, other_bot, update):
        assert teams_inbound(Activity.model_validate(data), channel="msteams") is None
    personal = teams_inbound(_activity("hi", kind="personal"), channel="msteams")
    assert personal is not None and personal.chat_type == "dm" and personal.mentioned
    assert personal.chat_id == "aad-ann" and personal.thread_id is None


def _event(text: str, **kwargs: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "message_id": "m1",
        "user": ChatUser("ann"),
        "text": text,
        "kind": "SPACE",
        "app_name": "Nodmix",
    }
    return message_event(**(defaults | kwargs))


def _chat(event: Any, *, channel: str) -> InboundMessage | None:
    read = read_event(event)
    assert read is not None
    return chat_inbound(read, channel=channel)


def test_a_chat_mention_counts_only_with_chats_annotation() -> None:
    mentioned = _chat(_event("hi", mention=True), channel="googlechat")
    assert mentioned is not None and mentioned.mentioned and mentioned.text == "hi"
    assert mentioned.chat_id == SPACE and mentioned.sender_mask == "ann@example.org"
    typed = _chat(_event("@Nodmix hi"), channel="googlechat")
    assert typed is not None and not typed.mentioned and typed.text == "@Nodmix hi"
    command = _event("/new")
    command["message"]["slashCommand"] = {"commandId": "1"}
    found = _chat(command, channel="googlechat")
    assert found is not None and found.mentioned


def test_the_workspace_add_on_event_format_is_read_too_and_bots_are_dropped() -> None:
    classic = _event("hello", kind="DIRECT_MESSAGE")
    add_on = {
        "chat": {"messagePayload": {"message": classic["message"], "space": classic["space"]}}
    }
    found = _chat(add_on, channel="googlechat")
    assert found is not None and found.chat_type == "dm" and found.chat_id == ChatUser("ann").id
    bot = _event("beep")
    bot["message"]["sender"]["type"] = "BOT"
    assert _chat(bot, channel="googlechat") is None
    assert read_event([1, 2]) is None


def test_chat_replies_convert_markdown_and_mention_no_one() -> None:
    text = to_chat_text("# Plan\n**bold** [docs](https://example.org) <users/all> <spaces/X>")
    assert text.startswith("*Plan*\n*bold* <https://example.org|docs>")
    assert "<users/" not in text and "<spaces/" not in text
