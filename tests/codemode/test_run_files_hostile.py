"""Files planted among the suspended runs (a pipe, a link to a device, a huge file) are skipped
at startup without the store blocking on them or reading them into memory."""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from nodmix.codemode.run_files import FileRunStore
from nodmix.codemode.run_records import decode, encode

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


def _open_store_traced(runs: Path) -> tuple[FileRunStore, int]:
    """The store opened over `runs` with a 1 MiB byte cap, and the peak traced allocation."""
    tracemalloc.start()
    try:
        store = _open_store(runs, max_bytes=1 << 20)
        return store, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_link_to_an_endless_device_is_skipped_without_reading_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "cm_planted.run").symlink_to("/dev/zero")
    store, peak = _open_store_traced(runs)
    assert len(store) == 0
    assert peak < 16 << 20
    assert not (runs / "cm_planted.run").is_symlink()


def test_a_file_larger_than_the_byte_cap_is_skipped_without_reading_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with (runs / "cm_planted.run").open("wb") as planted:
        planted.truncate(64 << 20)  # sparse: costs no disk
    store, peak = _open_store_traced(runs)
    assert len(store) == 0
    assert peak < 16 << 20
    assert not (runs / "cm_planted.run").exists()


def _run_file_with(runs: Path, **changes: object) -> Path:
    """A run parked by a store, its record then changed as a crafted file would be."""
    from tests.codemode.test_run_files import _park

    run_id = _park(FileRunStore(runs))
    path = runs / f"{run_id}.run"
    record, snapshot = decode(path.read_bytes())
    path.write_bytes(encode(msgspec.structs.replace(record, **changes), snapshot))
    return path


@pytest.mark.parametrize(
    "settings",
    [
        {"timeout_ms": 10**9},
        {"memory_limit_bytes": 1 << 40},
        {"max_pending_tool_calls": 10**6},
        {"max_snapshot_bytes": 1 << 40},
    ],
)
def test_a_run_file_with_limits_outside_their_ranges_is_skipped(
    tmp_path: Path, settings: dict[str, int]
) -> None:
    runs = tmp_path / "runs"
    record, _ = decode(_run_file_with(runs).read_bytes())
    path = _run_file_with(runs, settings=msgspec.structs.replace(record.settings, **settings))
    assert len(FileRunStore(runs)) == 1  # the first run only
    assert not path.exists()


def test_a_run_file_with_unknown_counters_is_skipped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = _run_file_with(runs, counters={"search": 1, "planted": 2})
    assert len(FileRunStore(runs)) == 0
    assert not path.exists()


def test_a_directory_named_like_a_run_file_is_skipped_and_startup_goes_on(tmp_path: Path) -> None:
    from tests.codemode.test_run_files import _park

    runs = tmp_path / "runs"
    run_id = _park(FileRunStore(runs))
    (runs / "cm_planted.run").mkdir()
    (runs / "cm_planted.run" / "inside").write_bytes(b"x")
    store = _open_store(runs)
    assert len(store) == 1 and store.get(run_id) is not None
