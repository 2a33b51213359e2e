"""Sandbox benchmarks: boot, bridge round trips, snapshots, timeouts, TypeScript.

Run from the repository root (after `nodmix sandbox install`):

    python -m benchmarks.sandbox.bench_sandbox [--quick]

All numbers are medians over repetitions in one warm process (the runtime is loaded once).
Prints a markdown table and writes `benchmarks/results/sandbox.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import write_results
from nodmix.sandbox import (
    Cell,
    Completed,
    Failed,
    Pending,
    SandboxLimits,
    get_runtime,
    templates,
    transform_typescript,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "sandbox.json"

SETUP = """(cap) => {
  const parse = JSON.parse, stringify = JSON.stringify;
  Object.defineProperty(globalThis, 'host', { value: Object.freeze({
    call: (op, v) => {
      const r = cap.call(op, stringify(v));
      return r === undefined ? r : parse(r);
    },
    request: (op, v) => cap.request(op, v),
  }) });
}"""

TS_CELL = """
interface Item { id: number; name: string; tags?: string[] }
enum Kind { Small, Large = 10 }
class Box<T> { constructor(public readonly value: T, private label: string = 'box') {} }
type Pair<K, V> = [K, V];
function pick<T extends Item>(items: T[], max: number): T[] { return items.slice(0, max); }
const items: Item[] = Array.from({ length: 10 }, (_, i) => ({ id: i, name: 'n' + i }));
const picked = pick(items, 3).map((item): Pair<number, string> => [item.id, item.name]);
const box = new Box<number>(picked.length);
let total = 0;
for (const [id] of picked) { total += id as number; }
const kind: Kind = total > 5 ? Kind.Large : Kind.Small;
const found = items.find(i => i.id === 2)!;
await Promise.resolve();
return { total, kind, box: box.value, found: found.name };
"""


class Handler:
    """Answers every call; settles requests inline unless `pending` is set."""

    def __init__(self, *, pending: bool = False) -> None:
        self.pending = pending

    def on_call(self, op: str, payload_json: str) -> str | None:
        return payload_json

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        return None if self.pending else (True, payload_json)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def expect(outcome: object, kind: type) -> None:
    if not isinstance(outcome, kind):
        raise AssertionError(f"unexpected outcome {outcome!r}")


def bench(quick: bool) -> dict[str, Any]:
    scale = 5 if quick else 1
    results: dict[str, Any] = {}

    start = time.perf_counter()
    get_runtime()
    results["runtime_load_ms"] = (time.perf_counter() - start) * 1e3

    def boot_and_return() -> None:
        expect(Cell.boot(SETUP, Handler()).run("return 1"), Completed)

    boot_and_return()  # warm: bytecode cache, lazy exports

    def build_template() -> None:
        templates.clear()
        Cell.boot(SETUP, Handler()).close()

    results["template_build_ms"] = median_ms(build_template, 30 // scale)
    results["boot_return_1_ms"] = median_ms(boot_and_return, 300 // scale)
    results["boot_only_ms"] = median_ms(lambda: Cell.boot(SETUP, Handler()), 300 // scale)

    requests = "let s = 0; for (let i = 0; i < 100; i++) s += await host.request('x', i); return s"

    def hundred_requests() -> None:
        cell = Cell.boot(SETUP, Handler())
        expect(cell.run(requests), Completed)

    results["boot_plus_100_inline_requests_ms"] = median_ms(hundred_requests, 50 // scale)
    calls = "let s = 0; for (let i = 0; i < 1000; i++) s += host.call('x', i); return s"
    cell_ms = median_ms(lambda: Cell.boot(SETUP, Handler()).run(calls), 20 // scale)
    results["sync_host_call_us"] = (cell_ms - results["boot_return_1_ms"]) / 1000 * 1e3

    suspended_src = (
        "const data = {a: [1, 2, 3]}; const v = await host.request('slow', data); return v.n + 1"
    )
    handler = Handler(pending=True)
    cell = Cell.boot(SETUP, handler)
    pending = cell.run(suspended_src)
    expect(pending, Pending)
    assert isinstance(pending, Pending)
    blob = cell.snapshot()
    results["snapshot_bytes"] = len(blob)
    results["snapshot_raw_memory_bytes"] = cell.memory_bytes
    results["snapshot_take_ms"] = median_ms(cell.snapshot, 100 // scale)

    def restore_to_completed() -> None:
        restored = Cell.restore(blob, handler)
        restored.deliver(pending.request_ids[0], True, '{"n": 41}')
        expect(restored.pump(), Completed)

    results["restore_deliver_completed_ms"] = median_ms(restore_to_completed, 100 // scale)

    def deferred_round_trips() -> None:
        c = Cell.boot(SETUP, Handler(pending=True))
        outcome = c.run(requests)
        while isinstance(outcome, Pending):
            c.deliver(outcome.request_ids[0], True, "1")
            outcome = c.pump()
        expect(outcome, Completed)

    results["boot_plus_100_delivered_requests_ms"] = median_ms(deferred_round_trips, 20 // scale)

    timeout = 0.5
    overshoot = []
    for _ in range(3 if quick else 5):
        spin = Cell.boot(None, Handler(), limits=SandboxLimits(timeout=timeout))
        start = time.perf_counter()
        expect(spin.run("while (true) {}"), Failed)
        overshoot.append((time.perf_counter() - start - timeout) * 1e3)
    results["while_true_timeout_s"] = timeout
    results["while_true_overshoot_ms"] = statistics.median(overshoot)

    start = time.perf_counter()
    js = transform_typescript(TS_CELL)
    results["typescript_first_transform_ms"] = (time.perf_counter() - start) * 1e3
    results["typescript_transform_ms"] = median_ms(
        lambda: transform_typescript(TS_CELL), 100 // scale
    )
    expect(Cell.boot(None, Handler()).run(js, wrapped=True), Completed)
    return results


ROWS = [
    ("runtime_load_ms", "Runtime load (compiled cache), once per process", "ms", None),
    (
        "template_build_ms",
        "Boot template (two probe boots + compare), once per setup and boot data",
        "ms",
        None,
    ),
    ("boot_only_ms", "New cell (fresh instance + copy of the boot template)", "ms", None),
    ("boot_return_1_ms", "New cell + `return 1`", "ms", "≤ 2 (raw cell)"),
    (
        "boot_plus_100_inline_requests_ms",
        "Boot + 100 awaited requests settled inline",
        "ms",
        "≤ 50",
    ),
    ("boot_plus_100_delivered_requests_ms", "Boot + 100 requests via deliver/pump", "ms", None),
    ("sync_host_call_us", "Synchronous host call (guest→host→guest)", "µs", None),
    (
        "snapshot_bytes",
        "Snapshot of a small suspended cell (pages changed since the template, zstd-1)",
        "bytes",
        "≤ 262144",
    ),
    ("snapshot_raw_memory_bytes", "…its raw linear memory", "bytes", None),
    ("snapshot_take_ms", "Take snapshot", "ms", None),
    ("restore_deliver_completed_ms", "Restore + deliver + pump → completed", "ms", "≤ 10"),
    ("while_true_overshoot_ms", "`while(true){}` stop latency past a 0.5 s timeout", "ms", "≤ 50"),
    ("typescript_first_transform_ms", "First TypeScript transform (load + transform)", "ms", None),
    ("typescript_transform_ms", "TypeScript transform, 15-line cell", "ms", None),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    results = bench(args.quick)
    print("| Measurement | Median | Target |")
    print("|---|---:|---|")
    for key, label, unit, target in ROWS:
        value = results[key]
        shown = f"{value:,.0f}" if unit == "bytes" else f"{value:.2f}"
        print(f"| {label} | {shown} {unit} | {target or ''} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "results": {k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()},
    }
    write_results(RESULTS, payload)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
