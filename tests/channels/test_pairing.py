"""Pairing codes: format, reuse, the pending cap, expiry, approval and revocation on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.pairing import MAX_PENDING, PairingError, PairingStore


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


def test_at_most_three_pending_requests_per_channel(tmp_path: Path) -> None:
    store = PairingStore(tmp_path)
    for sender in range(MAX_PENDING):
        assert store.request("telegram", str(sender))[0] is not None
    assert store.request("telegram", "extra") == (None, False)
    assert store.request("matrix", "extra")[0] is not None


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
