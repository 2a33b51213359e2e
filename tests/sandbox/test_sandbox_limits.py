"""Time, memory and stack limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from nodmix.sandbox import Cell, Completed, Failed, FailureKind, SandboxLimits

pytestmark = pytest.mark.integration


SLACK = 2.0
"""Upper bounds only tell "stopped" from "hung": a loaded machine may be slow to stop a guest;
how precisely budgets are kept is measured by the benchmarks, not asserted here."""


def timed(cell: Cell, source: str) -> tuple[Failed, float]:
    start = time.monotonic()
    outcome = cell.run(source)
    elapsed = time.monotonic() - start
    assert isinstance(outcome, Failed), outcome
    return outcome, elapsed


def test_an_infinite_loop_is_stopped_at_its_timeout_not_before(
    boot: Callable[..., Cell],
) -> None:
    outcome, elapsed = timed(boot(timeout=0.5), "while (true) {}")
    assert outcome.kind is FailureKind.TIMEOUT
    assert 0.45 < elapsed < 0.5 + SLACK  # precision is measured in benchmarks/, not here
    assert "0.5 s" in outcome.message


def test_try_catch_cannot_swallow_the_interrupt(boot: Callable[..., Cell]) -> None:
    source = "for (;;) { try { while (true) {} } catch (e) {} finally { continue; } }"
    outcome, elapsed = timed(boot(timeout=0.3), source)
    assert outcome.kind is FailureKind.TIMEOUT
    assert elapsed < 0.3 + SLACK


def test_a_microtask_loop_is_stopped(boot: Callable[..., Cell]) -> None:
    outcome, elapsed = timed(boot(timeout=0.3), "for (;;) { await null; }")
    assert outcome.kind is FailureKind.TIMEOUT
    assert elapsed < 0.3 + SLACK


def test_a_long_native_builtin_is_stopped_by_the_epoch_backstop(
    boot: Callable[..., Cell],
) -> None:
    # JSON.parse never consults QuickJS's interrupt handler: only the epoch deadline
    # (1.5x the timeout plus two ticks) stops it, and the VM is dead afterwards.
    cell = boot(timeout=0.2, memory_bytes=512 << 20)
    source = "const s = '[' + '{\"a\":[1,2,3]},'.repeat(2e6) + '0]'; return JSON.parse(s).length"
    outcome, elapsed = timed(cell, source)
    assert outcome.kind is FailureKind.TIMEOUT
    # Past 1.5x the timeout: it was the epoch trap, not QuickJS's interrupt handler.
    assert 0.2 * 1.5 <= elapsed < 0.2 * 1.5 + SLACK


def test_the_budget_is_shared_by_every_step_of_a_cell(boot: Callable[..., Cell]) -> None:
    # The first step uses 1.5 s of a 2 s budget; a fresh budget would let the second run 2 s.
    cell = boot(timeout=2.0)
    source = "const t = Date.now(); while (Date.now() - t < 1500) {} await host.request('w', 1);"
    first = cell.run(source + "\nwhile (true) {}")
    assert first.__class__.__name__ == "Pending"
    cell.deliver(1, True, "1")
    start = time.monotonic()
    outcome = cell.pump()
    assert isinstance(outcome, Failed) and outcome.kind is FailureKind.TIMEOUT
    assert time.monotonic() - start < 1.9


def test_the_host_can_interrupt_a_running_guest_from_another_thread(
    boot: Callable[..., Cell],
) -> None:
    cell = boot(timeout=30)
    timer = threading.Timer(0.2, cell.interrupt)
    timer.start()
    try:
        outcome, elapsed = timed(cell, "while (true) {}")
    finally:
        timer.cancel()
    assert outcome.kind is FailureKind.ABORTED
    assert elapsed < 2


def test_a_memory_bomb_fails_with_a_memory_failure_at_the_limit(
    boot: Callable[..., Cell],
) -> None:
    limits = {"memory_bytes": 8 << 20, "memory_headroom_bytes": 2 << 20}
    cell = boot(**limits)
    outcome, _ = timed(cell, "const a = []; for (;;) a.push('x'.repeat(1000) + a.length);")
    assert outcome.kind is FailureKind.MEMORY
    assert cell.memory_bytes <= (8 << 20) + (2 << 20)


def test_running_out_of_memory_is_catchable_by_the_guest(boot: Callable[..., Cell]) -> None:
    cell = boot(memory_bytes=8 << 20, memory_headroom_bytes=2 << 20)
    source = """
    let a = [];
    try { for (;;) a.push('y'.repeat(1000) + a.length); }
    catch (e) { const n = a.length; a = null; return [String(e), n > 1000]; }"""
    assert cell.run(source) == Completed('["InternalError: out of memory",true]')


def test_one_huge_allocation_is_refused(boot: Callable[..., Cell]) -> None:
    outcome = boot(memory_bytes=16 << 20).run("return new ArrayBuffer(1 << 30).byteLength")
    assert isinstance(outcome, Failed) and outcome.kind is FailureKind.MEMORY


def test_deep_recursion_is_a_catchable_range_error(boot: Callable[..., Cell]) -> None:
    source = """
    const f = n => f(n + 1) + 1;
    try { f(0); } catch (e) { return [e instanceof RangeError, e.message]; }"""
    assert boot().run(source) == Completed('[true,"Maximum call stack size exceeded"]')


def test_uncaught_runaway_recursion_is_a_stack_failure(boot: Callable[..., Cell]) -> None:
    outcome, _ = timed(boot(), "const f = n => f(n + 1) + 1; return f(0)")
    assert outcome.kind is FailureKind.STACK
    assert outcome.message.startswith("RangeError: Maximum call stack size exceeded")
    assert "recursed too deeply" in outcome.message


def test_native_stack_exhaustion_kills_only_the_vm_and_is_a_stack_failure(
    boot: Callable[..., Cell],
) -> None:
    # The guest's own JSON.stringify of a deeply nested value recurses in C below QuickJS's
    # stack check: the wasm stack overflows, the store traps and the VM is discarded; the
    # process is fine, and the failure is the guest's (STACK), not the host's.
    cell = boot(timeout=5)
    source = "let o = {}; for (let i = 0; i < 1e5; i++) o = {o}; return JSON.stringify(o).length"
    outcome, _ = timed(cell, source)
    assert outcome.kind is FailureKind.STACK
    assert "nests too deeply" in outcome.message and "stack ran out" in outcome.message
    assert boot().run("return 'still fine'") == Completed('"still fine"')


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError):
        SandboxLimits(memory_bytes=1024)
    with pytest.raises(ValueError):
        SandboxLimits(stack_bytes=4 << 20)


def test_time_spent_in_a_slow_host_handler_counts_against_the_budget(
    boot: Callable[..., Cell],
) -> None:
    class SlowHandler:
        def on_call(self, op: str, payload_json: str) -> str | None:
            time.sleep(0.5)  # simulates a handler that blocks far beyond the budget
            return payload_json

        def on_request(self, request_id: int, op: str, payload_json: str) -> None:
            return None

    cell = boot(timeout=0.2, handler=SlowHandler())
    outcome, elapsed = timed(cell, "host.call('slow', 1); return 'unreachable'")
    assert outcome.kind is FailureKind.TIMEOUT
    assert elapsed < 0.5 + SLACK
