"""Files planted among the suspended runs (a pipe, a link to a device, a huge file) are skipped
at startup without the store blocking on them or reading them into memory."""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from nodmix.codemode.run_files import FileRunStore

#: Long enough for a loaded machine; a store that blocks never finishes at all.
_DEADLINE_S = 30.0


def _open_store(runs: Path, **kwargs: int) -> FileRunStore:
    """Open the store on a thread, so a store that blocks fails the test instead of hanging."""
    opened: list[FileRunStore] = []
    thread = threading.Thread(
        target=lambda: opened.append(FileRunStore(runs, **kwargs)), daemon=True
    )
    thread.start()
    thread.join(_DEADLINE_S)
    if thread.is_alive():
        for path in runs.iterdir():  # unblock the reader, then fail
            if path.is_fifo():
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(_DEADLINE_S)
        pytest.fail("opening the run store blocked on a planted file")
    return opened[0]


def test_a_pipe_named_like_a_run_file_is_skipped_without_blocking_startup(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "cm_planted.run")
    store = _open_store(runs)
    assert len(store) == 0
    assert not (runs / "cm_planted.run").exists()


def test_a_link_to_an_endless_device_is_skipped_without_reading_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "cm_planted.run").symlink_to("/dev/zero")
    tracemalloc.start()
    try:
        store = _open_store(runs, max_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(store) == 0
    assert peak < 16 << 20
    assert not (runs / "cm_planted.run").is_symlink()


def test_a_file_larger_than_the_byte_cap_is_skipped_without_reading_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with (runs / "cm_planted.run").open("wb") as planted:
        planted.truncate(64 << 20)  # sparse: costs no disk
    tracemalloc.start()
    try:
        store = _open_store(runs, max_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(store) == 0
    assert peak < 16 << 20
    assert not (runs / "cm_planted.run").exists()
