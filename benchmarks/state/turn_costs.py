"""What one turn costs a gateway's event loop on PostgreSQL, in process: statements per turn
(on the event loop's thread and on others), the time the event loop waited on the database
(statements run on its thread) and the time it was blocked at all.

A loop-lag probe sleeps in short periods while a turn runs; how late it wakes is time some
synchronous code held the loop (a round trip to the database on the loop shows as such a delay;
awaiting a thread does not; on a loaded machine the process being descheduled shows too, which
the database wait, timed around each statement on the loop's thread, does not). Used by
`bench_replicas`; alone:

    python -m benchmarks.state.turn_costs
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

PERIOD_S = 0.0005
SLACK_S = 0.0002
"""A probe waking this much later than asked counts the delay as blocked."""


@contextmanager
def counting_statements() -> Iterator[Counter[str]]:
    """Count psycopg statements (`loop` = on the thread that entered, `other` = elsewhere);
    a pipeline counts one per statement (its round trips are fewer)."""
    import psycopg

    counts: Counter[str] = Counter()
    """Statements (`loop`, `other`) and microseconds the loop's thread spent in them."""
    home = threading.get_ident()
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != home:
                counts["other"] += 1
                return original(self, *args, **kwargs)
            counts["loop"] += 1
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                counts["loop_us"] += round((time.perf_counter() - started) * 1e6)

        patched.append((owner, name, original))
        setattr(owner, name, counted)

    wrap(psycopg.Cursor, "execute")
    wrap(psycopg.Cursor, "executemany")
    try:
        yield counts
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


async def blocked_while(work: Callable[[], Any]) -> tuple[float, Any]:
    """Run `await work()` beside a loop-lag probe; the loop's blocked time (ms), its result.

    The probe sleeps `PERIOD_S` and counts how late it wakes beyond `SLACK_S` (a sleeping
    probe, unlike a spinning one, leaves the GIL to worker threads as an idle gateway would).
    A block is counted from the probe's deadline, so up to `PERIOD_S` of each goes unseen.
    """
    late: list[float] = []
    done = False

    async def probe() -> None:
        while not done:
            started = time.perf_counter()
            await anyio.sleep(PERIOD_S)
            over = time.perf_counter() - started - PERIOD_S
            if over > SLACK_S:
                late.append(over)

    async with anyio.create_task_group() as group:
        group.start_soon(probe)
        await anyio.sleep(0)
        try:
            result = await work()
        finally:
            done = True
    return sum(late) * 1000, result


def measure(db_url: str | None, root: Path, turns: int = 200) -> dict[str, float]:
    """Median loop-blocked ms and statements per turn (loop / other) of a two-append turn,
    on PostgreSQL at `db_url` or (None) on files."""
    from nodmix.messages import AssistantMessage, TextBlock, Usage, user_message
    from nodmix.sessions.manager import SessionManager
    from nodmix.state.postgres.backend import PostgresState
    from nodmix.state.settings import StateSettings

    pg = None
    if db_url is not None:
        settings = StateSettings(backend="postgres", url=db_url)
        pg = PostgresState.open(settings, root, role="probe")
    manager = SessionManager(root, backend=pg.sessions() if pg is not None else None)

    async def turn(key: str) -> None:
        # As `runtime/turns.py` runs a turn: the session opened with `open_async`, and the
        # usage counters written as `runtime/usage_flush.py` writes them (off the loop when
        # the backend's reads are round trips).
        async with manager.hold_turn(key, timeout=10):
            session = await manager.open_async(key)
            session.append_message(user_message("hello"))
            await anyio.sleep(0)  # the model's reply arrives later
            session.append_message(AssistantMessage(content=(TextBlock(text="hi"),)))
            session.update_usage(Usage(input=3, output=2))
            if manager.backend.round_trips:
                await anyio.to_thread.run_sync(manager.flush_due)
            else:
                manager.flush_due()

    async def run() -> dict[str, float]:
        blocked: list[float] = []
        waited: list[float] = []
        loop_counts: list[int] = []
        other_counts: list[int] = []
        wall: list[float] = []
        for i in range(turns + 20):
            with counting_statements() as counts:
                started = time.perf_counter()
                ms, _ = await blocked_while(functools.partial(turn, f"p{i % 8}"))
                took = (time.perf_counter() - started) * 1000
            if i >= 20:
                blocked.append(ms)
                waited.append(counts["loop_us"] / 1000)
                wall.append(took)
                loop_counts.append(counts["loop"])
                other_counts.append(counts["other"])
        return {
            "loop_blocked_ms": round(statistics.median(blocked), 3),
            "loop_db_wait_ms": round(statistics.median(waited), 3),
            "turn_ms": round(statistics.median(wall), 3),
            "statements_on_loop": statistics.median(loop_counts),
            "statements_elsewhere": statistics.median(other_counts),
        }

    try:
        return anyio.run(run)
    finally:
        manager.close()
        if pg is not None:
            pg.close()


def main() -> None:
    import tempfile

    from tests.support.postgres import PostgresServer

    from benchmarks.report import cpu_calibration_ms

    print(f"CPU calibration {cpu_calibration_ms():.0f} ms")
    server = PostgresServer(fast=False).start()
    try:
        with tempfile.TemporaryDirectory(prefix="nodmix-probe-") as tmp:
            print("files", measure(None, Path(tmp) / "files"))
            print("postgres", measure(server.fresh_database(), Path(tmp) / "pg"))
    finally:
        server.close()


if __name__ == "__main__":
    main()
