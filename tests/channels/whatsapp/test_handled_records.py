"""WhatsApp's handled message ids are appended one record a message, never rewritten whole;
they are compacted when they pass a bound, a process killed mid-write loses no readable
record, and ids an older Nodmix kept in the position are moved into the records once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.whatsapp import window
from nodmix.channels.whatsapp.window import FileWhatsAppStore

RECORDS = Path("channels") / "whatsapp" / "handled.jsonl"


class _CountingLog(DeliveryLog):
    """The file delivery log, counting position writes."""

    writes = 0

    def save_position(self, position: dict[str, Any]) -> None:
        self.writes += 1
        super().save_position(position)


def _lines(state: Path) -> list[bytes]:
    return (state / RECORDS).read_bytes().splitlines(keepends=True)


def test_a_message_appends_one_record_and_rewrites_nothing(isolated_state: Path) -> None:
    now = time.time()
    log = _CountingLog(isolated_state, "whatsapp")
    store = FileWhatsAppStore(log, windows=DeliveryLog(isolated_state, "w"), clock=lambda: now)
    for n in range(50):
        store.remember(f"wamid.{n}", now - 100 + n)
    assert log.writes == 0  # the position is not rewritten per message
    assert len(_lines(isolated_state)) == 50
    again = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    assert all(again.handled(f"wamid.{n}") for n in range(50))
    assert not again.handled("wamid.new", now)


def test_the_records_are_compacted_past_the_bound_and_replay_protection_holds(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(window, "MAX_HANDLED", 10)
    monkeypatch.setattr(window, "COMPACT_AT", 20)
    now = time.time()
    store = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    for n in range(500):
        store.remember(f"wamid.{n}", now - 1000 + n)
        assert len(_lines(isolated_state)) <= 21  # bounded whatever the number of messages
    again = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    assert again.handled("wamid.0", now - 1000)  # below the floor
    assert again.handled("wamid.499")  # kept by id
    assert not again.handled("wamid.new", now)


def test_a_torn_last_record_is_skipped_and_cut_off_before_the_next(isolated_state: Path) -> None:
    now = time.time()
    store = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    store.remember("wamid.1", now - 10)
    with (isolated_state / RECORDS).open("ab") as handle:
        handle.write(b'{"id":"wamid.2","a')  # what a kill in the middle of a write leaves
    again = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    assert again.handled("wamid.1") and not again.handled("wamid.2")
    again.remember("wamid.3", now - 5)
    assert [line.endswith(b"\n") for line in _lines(isolated_state)] == [True, True]
    third = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    assert third.handled("wamid.1") and third.handled("wamid.3")


_WRITER = """
import sys, time
from pathlib import Path
from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.whatsapp import window
window.MAX_HANDLED, window.COMPACT_AT = 20, 40
store = window.FileWhatsAppStore(DeliveryLog(Path(sys.argv[1]), "whatsapp"))
n = 0
while True:
    store.remember(f"wamid.{n}", time.time())
    print(n, flush=True)
    n += 1
"""


def test_a_process_killed_while_writing_loses_no_recorded_id(isolated_state: Path) -> None:
    start = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(isolated_state)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    done = [int(child.stdout.readline()) for _ in range(150)]  # through several compactions
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    store = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"))
    # Every id whose write returned is handled: by its record, or below the floor.
    assert all(store.handled(f"wamid.{n}") for n in done[-20:])  # kept by id
    assert store.handled(f"wamid.{done[0]}", start)  # compacted away: below the floor
    assert not store.handled("wamid.never", time.time() + 60)
    store.remember("wamid.after", time.time())
    assert FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp")).handled("wamid.after")


def test_ids_an_older_nodmix_kept_in_the_position_move_into_the_records(
    isolated_state: Path,
) -> None:
    now = time.time()
    old = DeliveryLog(isolated_state, "whatsapp")
    old.save_position({"handled": {"wamid.0": now - 60}, "handledFloor": now - 120})
    log = _CountingLog(isolated_state, "whatsapp")
    store = FileWhatsAppStore(log, windows=DeliveryLog(isolated_state, "w"), clock=lambda: now)
    for n in range(1, 6):
        store.remember(f"wamid.{n}", now - 30 + n)
    assert log.writes == 1  # once, to take the ids out of the position
    assert "handled" not in old.position() and "handledFloor" not in old.position()
    again = FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), clock=lambda: now)
    assert again.handled("wamid.0") and again.handled("wamid.5")
    assert again.handled("wamid.older", now - 120)  # the old floor still holds
