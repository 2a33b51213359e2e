"""The file store of suspended runs: atomic files, damaged files skipped, TTL sweeps, owner
scope kept on disk, and the count and byte caps."""

from __future__ import annotations

import logging
import stat
import struct
import zlib
from pathlib import Path

import msgspec
import pytest

from nodmix.catalog import RunCatalog
from nodmix.codemode.run_files import FileRunStore, open_run_store
from nodmix.codemode.run_io import DAMAGED_KEEP
from nodmix.codemode.run_records import FORMAT_VERSION, MAGIC, RunFileError, decode
from nodmix.codemode.runs import RunScope, RunState, RunStore, RunStoreFull
from nodmix.codemode.settings import resolve_settings
from nodmix.config.schema import CodeModeConfig

SNAPSHOT = b"\x28\xb5\x2f\xfd" + bytes(range(256)) * 8


def _state(session: str = "s", ttl: int = 60) -> RunState:
    return RunState(
        scope=RunScope(
            agent_id="main", session_key=f"agent:main:{session}", session_id=session, run_id="turn"
        ),
        settings=resolve_settings(CodeModeConfig(enabled=True, snapshot_ttl_seconds=ttl)),
        catalog=RunCatalog.build([]),
        boot_json='{"tools": []}',
        output=[{"type": "text", "text": "hello"}],
    )


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _park(store: FileRunStore, session: str = "s", ttl: int = 60) -> str:
    run_id = store.park(_state(session, ttl), SNAPSHOT, "pending_tools").id
    store.flush()
    return run_id


def test_a_parked_run_is_written_to_a_private_file_that_a_new_store_loads(tmp_path: Path) -> None:
    runs = tmp_path / "codemode" / "runs"
    run_id = _park(FileRunStore(runs))
    path = runs / f"{run_id}.run"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    assert stat.S_IMODE(runs.parent.stat().st_mode) == 0o700  # `codemode/` too
    assert [p.name for p in runs.iterdir()] == [path.name]  # no temp file left behind

    reopened = FileRunStore(runs)
    assert len(reopened) == 1
    run = reopened.get(run_id)
    assert run is not None and run.detached
    assert run.snapshot == SNAPSHOT
    assert run.state.scope.session_id == "s" and run.state.output[0]["text"] == "hello"
    assert reopened.get("cm_unknown") is None


def test_a_torn_or_damaged_file_is_moved_aside_with_one_warning_and_the_rest_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runs = tmp_path / "runs"
    store = FileRunStore(runs)
    good, torn, flipped = _park(store), _park(store), _park(store)
    data = (runs / f"{torn}.run").read_bytes()
    (runs / f"{torn}.run").write_bytes(data[: len(data) // 2])
    damaged = bytearray((runs / f"{flipped}.run").read_bytes())
    damaged[-10] ^= 0xFF
    (runs / f"{flipped}.run").write_bytes(bytes(damaged))
    (runs / f"{good}.run.123.456.tmp").write_bytes(data[:100])  # a write cut off by a crash
    with pytest.raises(RunFileError, match="checksum"):
        decode(bytes(damaged))

    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        reopened = FileRunStore(runs)
        assert len(reopened) == 1 and reopened.get(good) is not None
        assert reopened.get(torn) is None and reopened.get(flipped) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # one per damaged file, none when it is waited on
    torn_line, flipped_line = sorted(warnings, key=lambda line: torn not in line)
    assert f"{runs}/{torn}.run cannot be read (truncated run file)" in torn_line
    assert f"moved to {runs}/damaged/" in torn_line and f"-{torn}.run:" in torn_line
    assert "run the program again" in torn_line and "delete it" in torn_line
    assert f"{flipped}.run cannot be read (run file checksum mismatch)" in flipped_line
    assert sorted(p.name for p in runs.iterdir()) == [f"{good}.run", "damaged"]
    (kept_torn,) = (runs / "damaged").glob(f"*-{torn}.run")
    (kept_flipped,) = (runs / "damaged").glob(f"*-{flipped}.run")
    assert kept_torn.read_bytes() == data[: len(data) // 2]
    assert kept_flipped.read_bytes() == bytes(damaged)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        FileRunStore(runs)  # the next start does not trip over them again
    assert caplog.records == []


def test_damaged_files_of_the_same_run_are_all_kept_up_to_a_bound(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    FileRunStore(runs)
    for number in range(DAMAGED_KEEP + 3):
        (runs / "cm_same.run").write_bytes(b"damaged %d" % number)
        FileRunStore(runs)
    kept = sorted((runs / "damaged").iterdir())
    assert len(kept) == DAMAGED_KEEP
    contents = {p.read_bytes() for p in kept}
    assert b"damaged %d" % (DAMAGED_KEEP + 2) in contents and b"damaged 0" not in contents


def test_a_file_damaged_after_startup_is_moved_aside_when_waited_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runs = tmp_path / "runs"
    run_id = _park(FileRunStore(runs))
    reopened = FileRunStore(runs)
    (runs / f"{run_id}.run").write_bytes(b"NDMXRUN\x00garbage")
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        assert reopened.get(run_id) is None
    reopened.flush()
    assert len(caplog.records) == 1 and "cannot be read (truncated run file)" in caplog.text
    assert not (runs / f"{run_id}.run").exists() and len(reopened) == 0
    (kept,) = (runs / "damaged").glob(f"*-{run_id}.run")
    assert kept.read_bytes() == b"NDMXRUN\x00garbage"


def test_expired_runs_are_removed_at_startup_and_by_the_sweep(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    clock = Clock()
    store = FileRunStore(runs, clock=clock)
    short = _park(store, ttl=10)
    long = _park(store, ttl=100)
    clock.now += 50
    reopened = FileRunStore(runs, clock=clock)  # `short` expired while the process was down
    assert not (runs / f"{short}.run").exists() and len(reopened) == 1

    clock.now += 100
    assert reopened.expire() == []  # nothing in memory to cancel, but the file goes
    reopened.flush()
    assert not (runs / f"{long}.run").exists() and len(reopened) == 0
    ended = reopened.ended(long)
    assert ended is not None and ended[1] == "expired" and ended[0].session_id == "s"


def test_a_live_run_that_expires_loses_its_file(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    clock = Clock()
    store = FileRunStore(runs, clock=clock)
    run_id = _park(store, ttl=10)
    clock.now += 11
    assert [r.id for r in store.expire()] == [run_id]
    store.flush()
    assert list(runs.iterdir()) == []


def test_dropped_and_aborted_runs_are_deleted_from_disk(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    store = FileRunStore(runs)
    dropped, aborted, kept = _park(store), _park(store, "t"), _park(store)
    assert store.drop(dropped) is not None
    assert [r.id for r in store.take(lambda r: r.state.scope.session_id == "t")] == [aborted]
    store.flush()
    assert [p.name for p in runs.iterdir()] == [f"{kept}.run"]


def test_the_owner_scope_is_kept_on_disk(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    mine = _park(FileRunStore(runs), session="mine")
    run = FileRunStore(runs).get(mine)
    assert run is not None
    assert run.state.scope == RunScope(
        agent_id="main", session_key="agent:main:mine", session_id="mine", run_id="turn"
    )


def test_new_suspensions_are_refused_past_the_run_and_byte_caps(tmp_path: Path) -> None:
    by_count = FileRunStore(tmp_path / "count", cap=2)
    _park(by_count)
    _park(by_count)
    with pytest.raises(RunStoreFull, match="too many suspended code mode runs"):
        by_count.park(_state(), SNAPSHOT, "pending_tools")

    by_bytes = FileRunStore(tmp_path / "bytes", max_bytes=4_000)
    _park(by_bytes)
    with pytest.raises(RunStoreFull, match=r"bytes on disk \(limit 4000\)"):
        by_bytes.park(_state(), SNAPSHOT, "pending_tools")
    assert len(by_bytes) == 1 and by_bytes.disk_bytes > len(SNAPSHOT)


def test_runs_from_disk_count_against_the_cap_and_the_oldest_are_evicted_at_startup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runs = tmp_path / "runs"
    clock = Clock()
    store = FileRunStore(runs, clock=clock)
    ids = []
    for _ in range(3):
        ids.append(_park(store))
        clock.now += 1
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        smaller = FileRunStore(runs, cap=2, clock=clock)
    assert len(smaller) == 2 and smaller.get(ids[0]) is None
    assert f"evicting code-mode run {ids[0]}" in caplog.text
    with pytest.raises(RunStoreFull):
        smaller.park(_state(), SNAPSHOT, "pending_tools")


def test_a_write_that_lands_after_the_run_was_dropped_does_not_bring_it_back(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    store = FileRunStore(runs)
    for _ in range(20):
        run = store.park(_state(), SNAPSHOT, "pending_tools")
        store.drop(run.id)  # usually before the writer thread got to it
    store.flush()
    assert list(runs.iterdir()) == [] and len(store) == 0 and store.disk_bytes == 0


def test_the_runtime_picks_the_memory_store_only_when_asked(tmp_path: Path) -> None:
    assert isinstance(open_run_store("file", tmp_path), FileRunStore)
    assert (tmp_path / "codemode" / "runs").is_dir()
    memory = open_run_store("memory", tmp_path / "elsewhere")
    assert type(memory) is RunStore and not (tmp_path / "elsewhere").exists()


def test_a_record_written_before_queues_and_timers_were_kept_still_loads(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_id = _park(FileRunStore(runs))
    path = runs / f"{run_id}.run"
    record, snapshot = decode(path.read_bytes())
    older = msgspec.structs.asdict(record)
    for field in ("queued", "timers", "source"):
        del older[field]
    body = msgspec.msgpack.encode(older)
    crc = zlib.crc32(snapshot, zlib.crc32(body))
    header = struct.pack("<8sHHIII", MAGIC, FORMAT_VERSION, 0, len(body), len(snapshot), crc)
    path.write_bytes(header + body + snapshot)

    run = FileRunStore(runs).get(run_id)
    assert run is not None and run.detached
    assert run.restored_queue == [] and len(run.state.timers) == 0
    assert run.state.source_map is None
    assert run.state.output[0]["text"] == "hello"
