"""Access rules: DM policies, group allowlists and mentions, channel over defaults."""

from __future__ import annotations

from pathlib import Path

from nodmix.channels.access import AccessRules, decide, resolve_rules
from nodmix.channels.pairing import PairingStore
from nodmix.channels.types import InboundMessage
from nodmix.config.channel_base import ChannelDefaults


def _dm(sender: str = "42") -> InboundMessage:
    return InboundMessage(
        channel="telegram", chat_type="dm", chat_id=sender, message_id="1", sender_id=sender
    )


def _group(chat: str = "-1", mentioned: bool = False) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        chat_type="group",
        chat_id=chat,
        message_id="1",
        sender_id="7",
        mentioned=mentioned,
    )


def test_dm_policies(tmp_path: Path) -> None:
    store = PairingStore(tmp_path)
    assert decide(AccessRules(), store, _dm()).verdict == "pair"
    assert decide(AccessRules(dm_policy="allowlist"), store, _dm()).verdict == "refuse"
    assert decide(AccessRules(dm_policy="disabled"), store, _dm()).verdict == "ignore"
    allowed = AccessRules(dm_policy="allowlist", allow_from=frozenset({"42"}))
    assert decide(allowed, store, _dm()).verdict == "allow"
    assert decide(AccessRules(dm_policy="open"), store, _dm()).verdict == "allow"


def test_groups_need_the_allowlist_and_a_mention(tmp_path: Path) -> None:
    store = PairingStore(tmp_path)
    rules = AccessRules(groups=frozenset({"-1"}))
    assert decide(rules, store, _group("-2", mentioned=True)).verdict == "refuse"
    assert decide(rules, store, _group("-1")).verdict == "ignore"
    assert decide(rules, store, _group("-1", mentioned=True)).verdict == "allow"
    no_mention = AccessRules(group_policy="open", require_mention=False)
    assert decide(no_mention, store, _group("-9")).verdict == "allow"
    disabled = AccessRules(group_policy="disabled")
    assert decide(disabled, store, _group("-1", mentioned=True)).verdict == "ignore"


def test_channel_section_wins_over_defaults() -> None:
    defaults = ChannelDefaults(dm_policy="allowlist", allow_from=[1], require_mention=False)
    rules = resolve_rules(ChannelDefaults(allow_from=["2"]), defaults)
    assert rules.dm_policy == "allowlist"
    assert rules.allow_from == frozenset({"2"})
    assert rules.require_mention is False


def test_direct_invites_from_strangers_stop_once_no_code_can_be_handed_out(
    tmp_path: Path,
) -> None:
    # a stranger's invitation is joined only so the pairing code can be sent; when no code
    # can be handed out any more (the channel's hourly limit), joining more rooms only grows
    # what the bot syncs
    from nodmix.channels.access import invite_allowed
    from nodmix.channels.pairing import MAX_CODES_PER_HOUR

    store = PairingStore(tmp_path)
    rules = AccessRules(dm_policy="pairing")

    def invited(sender: str) -> bool:
        return invite_allowed(
            rules, store, channel="matrix", sender_id=sender, room_id="!r", direct=True
        )

    for i in range(MAX_CODES_PER_HOUR):
        assert invited(f"@s{i}:hs")
        store.request("matrix", f"@s{i}:hs")
    assert not invited("@late:hs")
    assert invited(f"@s{MAX_CODES_PER_HOUR - 1}:hs")  # already waiting: may still be answered
    assert invite_allowed(
        AccessRules(dm_policy="pairing", allow_from=frozenset({"@late:hs"})),
        store,
        channel="matrix",
        sender_id="@late:hs",
        room_id="!r",
        direct=True,
    )
