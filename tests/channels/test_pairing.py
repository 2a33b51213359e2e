"""Pairing codes: format, reuse, the pending cap, expiry, approval and revocation on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.pairing import (
    MAX_CODES_PER_HOUR,
    MAX_CODES_PER_SENDER,
    MAX_PENDING,
    SENDER_COOLDOWN_SECONDS,
    PairingError,
    PairingStore,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_codes_are_eight_unambiguous_characters_and_reused_per_sender(tmp_path: Path) -> None:
    store = PairingStore(tmp_path)
    first, created = store.request("telegram", "42", sender_name="Ann")
    again, created_again = store.request("telegram", "42")
    assert first is not None and created and not created_again
    assert again == first
    assert len(first.code) == 8 and not set(first.code) & set("01IO")
    assert first.code == first.code.upper()


def test_a_full_channel_drops_its_oldest_request_so_a_newcomer_still_gets_a_code(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = PairingStore(tmp_path, clock=clock)
    first, _ = store.request("telegram", "0")
    for sender in range(1, MAX_PENDING):
        clock.now += 1
        assert store.request("telegram", str(sender))[0] is not None
    clock.now += 1
    late, created = store.request("telegram", "late")
    assert late is not None and created
    pending = {p.sender_id for p in store.load("telegram").pending}
    assert len(pending) == MAX_PENDING and "0" not in pending and "late" in pending
    assert first is not None
    with pytest.raises(PairingError, match="displace"):
        store.approve("telegram", first.code)
    assert store.request("matrix", "extra")[0] is not None


def test_a_few_accounts_cannot_push_a_newcomer_out(tmp_path: Path) -> None:
    clock = Clock()
    store = PairingStore(tmp_path, clock=clock)
    assert store.request("telegram", "newcomer")[0] is not None
    for _ in range(3):  # writing again repeats a sender's code, it never makes another
        for attacker in range(MAX_PENDING - 1):
            clock.now += 1
            store.request("telegram", f"attacker{attacker}")
    assert any(p.sender_id == "newcomer" for p in store.load("telegram").pending)


def test_a_displaced_sender_waits_a_cooldown_and_gets_few_codes_a_day(tmp_path: Path) -> None:
    clock = Clock()
    store = PairingStore(tmp_path, clock=clock)
    assert store.request("telegram", "x")[0] is not None
    for other in range(MAX_PENDING):  # pushed out by ten newer requests
        clock.now += 1
        store.request("telegram", f"o{other}")
    assert store.request("telegram", "x") == (None, False)  # the cooldown
    assert not store.may_request("telegram", "x")
    clock.now += SENDER_COOLDOWN_SECONDS
    for _ in range(MAX_CODES_PER_SENDER - 1):
        again, created = store.request("telegram", "x")
        assert again is not None and created
        clock.now += 3601  # that code expired too
    assert store.request("telegram", "x") == (None, False)  # the daily limit
    clock.now += 86400
    assert store.request("telegram", "x")[0] is not None


def test_a_channel_hands_out_a_bounded_number_of_codes_an_hour(tmp_path: Path) -> None:
    clock = Clock()
    store = PairingStore(tmp_path, clock=clock)
    for sender in range(MAX_CODES_PER_HOUR):
        assert store.request("telegram", f"s{sender}")[0] is not None
    assert store.request("telegram", "one-too-many") == (None, False)
    clock.now += 3601
    assert store.request("telegram", "one-too-many")[0] is not None


def test_codes_expire_after_an_hour(tmp_path: Path) -> None:
    clock = Clock()
    store = PairingStore(tmp_path, clock=clock)
    request, _ = store.request("telegram", "42")
    assert request is not None
    clock.now += 3601
    with pytest.raises(PairingError, match="expire"):
        store.approve("telegram", request.code)


def test_approval_survives_a_new_store_and_revoke_forgets(tmp_path: Path) -> None:
    request, _ = PairingStore(tmp_path).request("telegram", "42")
    assert request is not None
    PairingStore(tmp_path).approve("telegram", request.code.lower())
    store = PairingStore(tmp_path)
    assert store.is_approved("telegram", "42")
    assert store.load("telegram").pending == []
    store.revoke("telegram", "42")
    assert not PairingStore(tmp_path).is_approved("telegram", "42")
    with pytest.raises(PairingError):
        store.revoke("telegram", "42")


def test_an_unknown_code_is_refused_with_the_listing_command_of_this_installation(
    tmp_path: Path,
) -> None:
    from nodmix.invocation import nodmix_command

    store = PairingStore(tmp_path)
    with pytest.raises(PairingError) as refused:
        store.approve("telegram", "nope1234")
    message = str(refused.value)
    assert "'NOPE1234'" in message and f"`{nodmix_command()} pairing list`" in message
