"""The channel layer's state on disk (pairing, delivery log, status) is readable by the user
only, whatever the umask: folders 0700, files and lock files 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.pairing import PairingStore
from nodmix.channels.types import InboundMessage


@pytest.fixture
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_pairing_and_delivery_state_is_private_under_a_permissive_umask(
    tmp_path: Path, usual_umask: None
) -> None:
    state = tmp_path / "private-state"
    state.mkdir(mode=0o700)
    request, _ = PairingStore(state).request("telegram", "42", sender_name="Ann")
    assert request is not None
    PairingStore(state).approve("telegram", request.code)
    log = DeliveryLog(state, "telegram")
    msg = InboundMessage(
        channel="telegram", chat_type="dm", chat_id="42", message_id="1", sender_id="42"
    )
    assert log.accept(msg)
    log.save_position({"offset": 2})

    paths = sorted(state.rglob("*"))
    assert {p.relative_to(state).as_posix() for p in paths} >= {
        "channels",
        "channels/pairing",
        "channels/pairing/telegram.json",
        "channels/pairing/telegram.json.lock",
        "channels/telegram",
        "channels/telegram/pending",
        "channels/telegram/position.json",
    }
    open_to_others = [
        f"{p.relative_to(state)} {stat.S_IMODE(p.stat().st_mode):o}"
        for p in paths
        if p.stat().st_mode & 0o077
    ]
    assert open_to_others == []
