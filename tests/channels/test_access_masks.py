"""`allowFrom` masks: IRC `nick!user@host` patterns and email addresses, ignoring case."""

from __future__ import annotations

from pathlib import Path

from nodmix.channels.access import AccessRules, decide
from nodmix.channels.pairing import PairingStore
from nodmix.channels.types import InboundMessage


def _dm(sender: str, mask: str | None) -> InboundMessage:
    return InboundMessage(
        channel="irc",
        chat_type="dm",
        chat_id=sender,
        message_id="1",
        sender_id=sender,
        sender_mask=mask,
    )


def _verdict(entries: set[str], msg: InboundMessage, tmp_path: Path) -> str:
    rules = AccessRules(dm_policy="allowlist", allow_from=frozenset(entries))
    return decide(rules, PairingStore(tmp_path), msg).verdict


def test_masks_match_the_whole_sender_with_wildcards(tmp_path: Path) -> None:
    ann = _dm("ann", "Ann!~ann@home.example.org")
    assert _verdict({"ann!*@*.example.org"}, ann, tmp_path) == "allow"
    assert _verdict({"*!~ann@home.example.org"}, ann, tmp_path) == "allow"
    assert _verdict({"ann!*@evil.example"}, ann, tmp_path) == "refuse"
    assert _verdict({"[x]!*@*"}, _dm("[x]", "[x]!u@h"), tmp_path) == "allow"


def test_a_plain_nick_matches_nothing_because_anyone_can_take_a_nick(tmp_path: Path) -> None:
    mask = "ann!ann@h"
    assert _verdict({"ann"}, _dm(mask, "Ann!ann@h"), tmp_path) == "refuse"
    assert _verdict({"ANN"}, _dm(mask, "Ann!ann@h"), tmp_path) == "refuse"


def test_sender_ids_match_exactly_ignoring_case(tmp_path: Path) -> None:
    assert _verdict({"account:Ann"}, _dm("account:ann", "Ann!x@h"), tmp_path) == "allow"
    assert _verdict({"Ann!Ann@H"}, _dm("ann!ann@h", "Ann!Ann@H"), tmp_path) == "allow"
    assert _verdict({"account:ann"}, _dm("account:annie", "ann!x@h"), tmp_path) == "refuse"


def test_email_addresses_and_domains(tmp_path: Path) -> None:
    mail = _dm("ann@example.org", "ann@example.org")
    assert _verdict({"Ann@Example.org"}, mail, tmp_path) == "allow"
    assert _verdict({"*@example.org"}, mail, tmp_path) == "allow"
    assert _verdict({"*@example.com"}, mail, tmp_path) == "refuse"
