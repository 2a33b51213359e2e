"""Worker/loop wake-ups on the shared wasm rendezvous module (real wasmtime, real threads)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import wasmtime

from nodmix.sandbox import rendezvous, spinwasm, threads
from nodmix.sandbox.rendezvous import LockRendezvous, Rendezvous, SpinRendezvous

DEADLINE = 10.0
#: With one usable CPU the module never spins or listens (see `SpinModule`).
NEEDS_TWO_CPUS = pytest.mark.skipif(
    threads.usable_cpus() < 2, reason="one CPU: nothing spins or listens"
)


def _wait_until(condition: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.001)


@pytest.fixture
def module() -> spinwasm.SpinModule:
    """The process's shared module, built (the first request starts a build on a thread)."""
    _wait_until(lambda: rendezvous._shared_module() is not None)
    built = rendezvous._shared_module()
    assert built is not None
    return built


@pytest.fixture
def spin(module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch) -> Iterator[SpinRendezvous]:
    # No backoff left over from earlier cells or tests in this process.
    monkeypatch.setattr(module, "loop_listens", spinwasm.Adaptive())
    monkeypatch.setattr(module, "worker_spins", spinwasm.Adaptive())
    made = rendezvous.new_rendezvous()
    assert isinstance(made, SpinRendezvous)
    yield made
    made.close()


def _in_thread(body: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(body()), daemon=True)
    thread.start()
    return thread, out


def test_a_set_from_another_thread_wakes_the_waiter(spin: SpinRendezvous) -> None:
    spin.clear()
    thread, out = _in_thread(lambda: spin.wait(DEADLINE))
    spin.set()
    thread.join(DEADLINE)
    assert out == [True]


def test_a_wait_without_a_set_times_out() -> None:
    made = rendezvous.new_rendezvous()
    made.clear()
    start = time.monotonic()
    assert made.wait(0.02) is False
    assert time.monotonic() - start >= 0.02
    made.close()


def test_a_set_before_the_wait_is_not_lost_but_one_before_clear_is_forgotten(
    spin: SpinRendezvous,
) -> None:
    spin.set()
    spin.clear()
    assert spin.wait(0.01) is False
    spin.set()
    assert spin.wait(DEADLINE) is True


def test_a_request_with_nobody_listening_is_not_claimed(spin: SpinRendezvous) -> None:
    spin.clear()
    assert spin.request_wait(DEADLINE) is None


@NEEDS_TWO_CPUS
def test_a_listening_loop_takes_the_next_request_and_answers_it(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listen long enough that a loaded machine cannot make the request late.
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 2.0)
    spin.clear()
    listener, claimed = _in_thread(spin.set_and_listen)
    _wait_until(lambda: module.exports().load(spin._state) == spinwasm.LISTENING)
    assert spin.wait(DEADLINE) is True  # the answer to the previous request
    spin.clear()
    worker, answered = _in_thread(lambda: spin.request_wait(DEADLINE))
    listener.join(DEADLINE)
    assert claimed == [True]
    spin.set()  # the loop answers the request it took
    worker.join(DEADLINE)
    assert answered == [True]


@NEEDS_TWO_CPUS
def test_a_retired_rendezvous_is_not_claimed_and_stops_its_listener(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 5.0)
    listener, claimed = _in_thread(spin.set_and_listen)
    _wait_until(lambda: module.exports().load(spin._state) == spinwasm.LISTENING)
    spin.close()
    listener.join(DEADLINE)
    assert claimed == [False] and not listener.is_alive()
    # A step that ends says nothing about whether listening pays off: no backoff.
    assert module.loop_listens.skip == 0
    spin.clear()
    assert spin.request_wait(0.01) is None


@NEEDS_TWO_CPUS
def test_a_listen_nobody_claims_backs_off_for_the_next_answers(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 0.001)
    for _ in range(spinwasm.FREE_MISSES):
        assert spin.set_and_listen() is False  # nobody asked: a miss, free so far
        assert module.loop_listens.skip == 0
    assert spin.set_and_listen() is False  # one miss too many
    assert module.loop_listens.skip == 2
    for _ in range(2):
        assert spin.set_and_listen() is False
        assert module.exports().load(spin._state) == spinwasm.IDLE  # did not listen
    assert spin.set_and_listen() is False  # listened again, missed again: longer backoff
    assert module.loop_listens.skip == 4


def test_backoff_grows_to_a_bound_and_hits_bring_it_back_down() -> None:
    adaptive = spinwasm.Adaptive()
    for _ in range(20):
        while not adaptive.allow():
            pass
        adaptive.record(False)
    assert adaptive.skip == spinwasm.MAX_BACKOFF
    adaptive.skip = 0
    for _ in range(spinwasm.MAX_PRESSURE - spinwasm.FREE_MISSES):
        assert adaptive.allow()
        adaptive.record(True)
    adaptive.record(False)  # back to one miss too many: the shortest backoff
    assert adaptive.skip == 2


def test_an_occasional_miss_among_hits_never_skips() -> None:
    adaptive = spinwasm.Adaptive()
    for _ in range(100):
        for paid_off in (True, True, True, False):
            assert adaptive.allow()
            adaptive.record(paid_off)


def test_a_backoff_counted_below_zero_by_racing_threads_does_not_stop_spinning_for_good() -> None:
    adaptive = spinwasm.Adaptive()
    adaptive.skip = -1  # two workers both took the last skip
    assert adaptive.allow() and adaptive.allow()
    adaptive.pressure = spinwasm.FREE_MISSES
    adaptive.record(False)
    assert not adaptive.allow() and not adaptive.allow() and adaptive.allow()


@NEEDS_TWO_CPUS
def test_a_worker_whose_spins_do_not_pay_off_blocks_at_once_for_a_while(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    module.worker_spins.pressure = spinwasm.FREE_MISSES
    spin.clear()
    assert spin.wait(0.005) is False  # spun, then blocked, then timed out: one miss too many
    assert module.worker_spins.skip == 2
    assert rendezvous._worker_spin(module, 1.0) == 0 == rendezvous._worker_spin(module, 1.0)
    assert rendezvous._worker_spin(module, 1.0) > 0


def test_slots_come_back_when_rendezvous_are_dropped(module: spinwasm.SpinModule) -> None:
    # More than one page of slots, made and dropped one after another: all stay spinning.
    for _ in range(spinwasm.PAGE // spinwasm.SLOT_BYTES + 100):
        made = rendezvous.new_rendezvous()
        assert isinstance(made, SpinRendezvous)
        made.close()
        del made
    gc.collect()


def test_with_every_slot_taken_a_lock_rendezvous_still_wakes(
    module: spinwasm.SpinModule,
) -> None:
    held: list[Rendezvous] = []
    while isinstance(made := rendezvous.new_rendezvous(), SpinRendezvous):
        held.append(made)
    assert isinstance(made, LockRendezvous)
    made.clear()
    thread, out = _in_thread(lambda: made.wait(DEADLINE))
    assert made.set_and_listen() is False and made.request_wait(0.01) is None
    thread.join(DEADLINE)
    assert out == [True]
    held.clear()
    gc.collect()
    assert isinstance(rendezvous.new_rendezvous(), SpinRendezvous)


def test_on_one_cpu_nothing_spins_and_the_answer_still_arrives(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "spins_per_second", 0.0)
    spin.clear()
    thread, out = _in_thread(lambda: spin.wait(DEADLINE))
    assert spin.set_and_listen() is False  # answered, without listening
    thread.join(DEADLINE)
    assert out == [True]
    assert module.exports().load(spin._state) == spinwasm.IDLE


@NEEDS_TWO_CPUS
def test_an_answer_after_the_worker_closed_does_not_listen_on_the_retired_slot(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 0.001)
    # The worker's close lands between the loop's check of `_closed` and its listen.
    module.exports().store(spin._state, spinwasm.RETIRED)
    spin.clear()
    assert spin.set_and_listen() is False
    assert spin.wait(0) is True  # still answered
    assert module.exports().load(spin._state) == spinwasm.RETIRED  # not revived
    assert module.loop_listens.skip == 0  # and not counted as a listen nobody claimed
    spin.clear()
    assert spin.request_wait(0.01) is None


def test_a_build_that_fails_in_any_way_leaves_locks_that_still_wake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_shared_memories() -> spinwasm.SpinModule:
        raise RuntimeError("this wasmtime has no shared memories")

    monkeypatch.setattr(rendezvous, "SpinModule", no_shared_memories)
    monkeypatch.setattr(rendezvous, "_shared", None)
    monkeypatch.setattr(rendezvous, "_shared_state", "new")
    assert isinstance(rendezvous.new_rendezvous(), LockRendezvous)  # while it builds
    _wait_until(lambda: rendezvous._shared_state == "failed")
    made = rendezvous.new_rendezvous()
    assert isinstance(made, LockRendezvous)
    made.clear()
    thread, out = _in_thread(lambda: made.wait(DEADLINE))
    made.set()
    thread.join(DEADLINE)
    assert out == [True]


def test_a_thread_that_cannot_make_its_instance_gets_a_lock_and_the_slot_back(
    module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_memory() -> object:
        raise wasmtime.WasmtimeError("failed to allocate the instance")

    free = len(module._free)
    monkeypatch.setattr(module, "exports", out_of_memory)
    assert isinstance(rendezvous.new_rendezvous(), LockRendezvous)
    assert len(module._free) == free


def test_without_wasmtimes_private_api_the_fast_lane_imports_and_uses_locks() -> None:
    # The private API missing (another wasmtime build): everything takes the public paths.
    probe = (
        "import wasmtime._func as f; del f.maybe_raise_last_exn\n"
        "from nodmix.sandbox import wasm, rendezvous\n"
        "import nodmix.codemode.handoff\n"
        "assert not wasm.FAST_PATH\n"
        "print(type(rendezvous.new_rendezvous()).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "LockRendezvous"


@NEEDS_TWO_CPUS
def test_while_other_guests_hold_the_cpus_nothing_spins_or_listens(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 5.0)
    assert rendezvous._worker_spin(module, 1.0) > 0
    taken = 0
    while threads.free_cpu_slots() >= 2:
        threads._SLOTS.acquire()
        taken += 1
    try:
        assert rendezvous._worker_spin(module, 1.0) == 0
        spin.clear()
        assert spin.set_and_listen() is False  # answered at once, without a 5 s listen
        assert module.exports().load(spin._state) == spinwasm.IDLE
        assert spin.wait(0) is True
    finally:
        for _ in range(taken):
            threads._SLOTS.release()


@NEEDS_TWO_CPUS
def test_a_blocked_waiter_is_woken_without_a_listen(
    spin: SpinRendezvous, module: spinwasm.SpinModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 5.0)
    module.worker_spins.skip = 1_000  # the worker blocks at once
    spin.clear()
    thread, out = _in_thread(lambda: spin.wait(DEADLINE))
    _wait_until(lambda: module.exports().load(spin._answer + 8) == 2)  # blocked
    assert spin.set_and_listen() is False  # answered, without a 5 s listen
    thread.join(DEADLINE)
    assert out == [True]
    assert module.exports().load(spin._state) == spinwasm.IDLE
    assert module.loop_listens.pressure == 0  # and not counted as a miss
