"""Durable code-mode runs: the cost of writing a suspended run to disk, and what the model waits
for (warm process, real QuickJS-WASI sandbox, real files in a temp directory).

Run from the repository root:

    python -m benchmarks.codemode.bench_run_files [--reps 30]

Measures, for a real suspended run (a cell awaiting a gated tool):

- persisting it: capture on the loop, encode, write a temp file, fsync, rename (what the
  writer thread does for a newly parked run), synchronously, each time a new file;
- `park` on the event loop, file vs memory store, and `saved`: the wait for the file to be on
  disk that comes before `exec` returns `waiting` (nothing to wait for with the memory store);
- `wait`: restore to completed, file vs memory store (the file stays until the loop records the
  result, then `recorded` deletes it: timed on its own);
- loading a run written by an earlier process (the first `wait` after a restart).

Prints a markdown table and writes `benchmarks/results/codemode_run_files.json`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.codemode.bench_codemode import Bench
from benchmarks.report import print_table, write_results
from nodmix.codemode.engine import CodeModeEngine
from nodmix.codemode.run_files import FileRunStore, write_atomically
from nodmix.codemode.run_records import encode, record_of
from nodmix.codemode.runs import RunStore, SuspendedRunStore
from nodmix.tools import FunctionTool, Tool, ToolContext, ToolResult, core_tools

RESULTS = Path(__file__).resolve().parent.parent / "results" / "codemode_run_files.json"
TARGETS = {"persist_ms": 5.0}
PROGRAM = "const r = await tools.gated({}); return r.text"


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _tools(gate: dict[str, anyio.Event]) -> list[Tool]:
    async def gated(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await gate["release"].wait()
        return ToolResult.text("released")

    return [
        *core_tools(None),
        FunctionTool.create(gated, name="gated", description="Return when released."),
    ]


async def _measure(store: SuspendedRunStore, workspace: Path, reps: int) -> dict[str, float]:
    """Median `park` time (on the loop), `saved` time (until the file is on disk), `wait`
    restore-to-completed time and `recorded` time with `store`."""
    gate = {"release": anyio.Event()}
    parks: list[float] = []
    saves: list[float] = []
    original, original_saved = store.park, store.saved

    def timed_park(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args)
        finally:
            parks.append((time.perf_counter() - start) * 1000)

    async def timed_saved(*args: Any) -> None:
        start = time.perf_counter()
        try:
            await original_saved(*args)
        finally:
            saves.append((time.perf_counter() - start) * 1000)

    store.park = timed_park  # type: ignore[method-assign]
    store.saved = timed_saved  # type: ignore[method-assign]
    engine = CodeModeEngine(store)
    restores: list[float] = []
    records: list[float] = []
    async with engine.running():
        bench = Bench(engine, _tools(gate), workspace)
        for i in range(reps + 3):
            gate["release"] = anyio.Event()
            result, _ = await bench.exec(PROGRAM, 100)
            assert result["status"] == "waiting", result
            gate["release"].set()
            await anyio.sleep(0.01)  # let the released tool finish before timing the restore
            start = time.perf_counter()
            done = await engine.wait(bench.services, {"runId": result["runId"]}, "wait")
            if i >= 3:
                restores.append((time.perf_counter() - start) * 1000)
            assert done["status"] == "completed", done
            start = time.perf_counter()
            engine.recorded("wait")  # what the agent loop does once the result is written
            if i >= 3:
                records.append((time.perf_counter() - start) * 1000)
    return {
        "park_ms": _median(parks[3:]),
        "saved_ms": _median(saves[3:]),
        "restore_ms": _median(restores),
        "recorded_ms": _median(records),
    }


async def _persist_and_load(workspace: Path, directory: Path, reps: int) -> dict[str, float]:
    """Synchronous persist time of a real suspended run, and its load in a fresh store."""
    gate = {"release": anyio.Event()}
    memory = RunStore()
    engine = CodeModeEngine(memory)
    out: dict[str, float] = {}
    async with engine.running():
        bench = Bench(engine, _tools(gate), workspace)
        result, _ = await bench.exec(PROGRAM, 100)
        run = memory.get(result["runId"])
        assert run is not None
        run.expires_at = time.time() + 900  # the memory store's clock is monotonic
        out["snapshot_kb"] = len(run.snapshot) / 1024
        lock = threading.Lock()
        persist: list[float] = []
        for i in range(reps):  # each a new file, as for a newly parked run
            start = time.perf_counter()
            data = encode(record_of(run, time.time()), run.snapshot)
            write_atomically(directory / f"{i}.run", data, lock=lock, commit=lambda: True)
            persist.append((time.perf_counter() - start) * 1000)
        out["file_kb"] = len(data) / 1024
        out["persist_ms"] = _median(persist)
        for i in range(reps):
            (directory / f"{i}.run").unlink()
        write_atomically(directory / f"{run.id}.run", data, lock=lock, commit=lambda: True)
        loads: list[float] = []
        for _ in range(reps):
            start = time.perf_counter()
            loaded = FileRunStore(directory).get(run.id)
            loads.append((time.perf_counter() - start) * 1000)
            assert loaded is not None and loaded.detached
        out["load_ms"] = _median(loads)
        gate["release"].set()
    return out


async def _run(reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nodmix-bench-runs-") as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        out: dict[str, Any] = {}
        (root / "persist").mkdir()
        out.update(await _persist_and_load(workspace, root / "persist", reps))
        memory = await _measure(RunStore(), workspace, reps)
        files = await _measure(FileRunStore(root / "runs"), workspace, reps)
        out.update({f"memory_{k}": v for k, v in memory.items()})
        out.update({f"file_{k}": v for k, v in files.items()})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    r = anyio.run(_run, args.reps)
    rows = [
        (
            "persist a suspended run (encode, write temp file, fsync, rename)",
            f"{r['persist_ms']:.2f} ms ({r['file_kb']:.0f} KB file)",
            "≤ 5 ms",
            r["persist_ms"] <= TARGETS["persist_ms"],
        ),
        (
            "`park` on the event loop: file store / memory store",
            f"{r['file_park_ms']:.3f} / {r['memory_park_ms']:.3f} ms",
            "-",
            None,
        ),
        (
            "then until the run file is on disk, before `waiting` is returned (file store)",
            f"{r['file_saved_ms']:.2f} ms",
            "-",
            None,
        ),
        (
            "`wait`: restore to completed, file store / memory store",
            f"{r['file_restore_ms']:.2f} / {r['memory_restore_ms']:.2f} ms",
            "-",
            None,
        ),
        (
            "deleting a consumed run's file once its result is recorded (on the loop)",
            f"{r['file_recorded_ms']:.3f} ms",
            "-",
            None,
        ),
        (
            "load a run written by an earlier process (first `wait` after a restart)",
            f"{r['load_ms']:.2f} ms",
            "-",
            None,
        ),
    ]
    print_table(rows)
    document = {
        "benchmark": "codemode_run_files",
        "results": r,
        "targets": TARGETS,
        "all_targets_met": all(row[3] is not False for row in rows),
        "cpus": os.cpu_count(),
    }
    write_results(args.output, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
