"""Final values, JSON safety and guest error reporting."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from nodmix.sandbox import Cell, Completed, Failed, FailureKind
from nodmix.sandbox.prelude import MAX_VALUE_DEPTH, TOO_DEEP

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration


def completed(cell: Cell, source: str) -> object:
    outcome = cell.run(source)
    assert isinstance(outcome, Completed), outcome
    return outcome.value()


def failed(cell: Cell, source: str) -> Failed:
    outcome = cell.run(source)
    assert isinstance(outcome, Failed), outcome
    return outcome


def test_a_trivial_program_completes_with_its_return_value(boot: Callable[..., Cell]) -> None:
    assert completed(boot(), "return 1") == 1


def test_top_level_await_and_return_work(boot: Callable[..., Cell]) -> None:
    assert completed(boot(), "const x = await Promise.resolve(20); return x + 22") == 42


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("return undefined", None),
        ("", None),
        ("return 10n", "10"),
        ("return Symbol('s')", "Symbol(s)"),
        ("return function named() {}", "function named() {}"),
        ("return NaN", None),
        ("return new Error('boom')", {"name": "Error", "message": "boom"}),
        (
            "return {e: new TypeError('t'), n: 5n}",
            {"e": {"name": "TypeError", "message": "t"}, "n": "5"},
        ),
        ("return {toJSON() { return 'custom'; }}", "custom"),
        ("return '\\u{1F600}'", "\U0001f600"),
        ("return [1, undefined, () => 1]", [1, None, None]),
    ],
)
def test_odd_final_values_become_json_safe(
    boot: Callable[..., Cell], source: str, expected: object
) -> None:
    assert completed(boot(), source) == expected


def test_a_circular_final_value_becomes_a_descriptive_string(boot: Callable[..., Cell]) -> None:
    value = completed(boot(), "const a = {}; a.self = a; return a")
    assert isinstance(value, str)
    assert value.startswith("[unserializable value:")
    assert "circular" in value


def test_a_throwing_tojson_does_not_escape_as_a_failure(boot: Callable[..., Cell]) -> None:
    value = completed(boot(), "return { toJSON() { throw new Error('nope'); } }")
    assert value == "[unserializable value: nope]"


def test_an_uncaught_error_is_reported_as_name_colon_message(boot: Callable[..., Cell]) -> None:
    outcome = failed(boot(), "const x = 1;\nx();")
    assert outcome.kind is FailureKind.GUEST_ERROR
    assert re.fullmatch(r"TypeError: not a function \(at cell\.js:2:\d+\)", outcome.message)


def test_error_locations_use_the_cell_filename_and_never_host_paths(
    boot: Callable[..., Cell],
) -> None:
    outcome = boot().run("await null;\nnull.x", filename="task.js")
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("TypeError: cannot read property 'x' of null (at task.js:2:")
    assert "/" not in outcome.message


def test_a_thrown_non_error_value_is_reported_as_uncaught(boot: Callable[..., Cell]) -> None:
    assert failed(boot(), "throw 'plain'").message == "Uncaught plain"
    assert failed(boot(), "throw {code: 7}").message == 'Uncaught {"code":7}'


def test_a_custom_error_subclass_keeps_its_name(boot: Callable[..., Cell]) -> None:
    source = "class MyError extends Error { name = 'MyError' }\nthrow new MyError('bad')"
    assert failed(boot(), source).message.startswith("MyError: bad (at cell.js:")


def test_a_syntax_error_fails_with_its_location(boot: Callable[..., Cell]) -> None:
    outcome = failed(boot(), "let ok = 1;\nlet = = 2;")
    assert outcome.kind is FailureKind.GUEST_ERROR
    assert outcome.message.startswith("SyntaxError: ")
    assert "(at cell.js:2:" in outcome.message


def test_a_rejected_result_promise_is_a_guest_error(boot: Callable[..., Cell]) -> None:
    outcome = failed(boot(), "await Promise.reject(new RangeError('r'))")
    assert outcome.message.startswith("RangeError: r")


def test_dates_are_in_utc(boot: Callable[..., Cell]) -> None:
    value = completed(boot(), "return [new Date(0).getTimezoneOffset(), new Date(0).getHours()]")
    assert value == [0, 0]


def test_a_finished_cell_repeats_its_outcome_and_refuses_another_run(
    boot: Callable[..., Cell],
) -> None:
    from nodmix.errors import SandboxError

    cell = boot()
    first = cell.run("return 'done'")
    assert cell.finished
    assert cell.pump() == first
    with pytest.raises(SandboxError):
        cell.run("return 2")


def test_an_already_wrapped_script_runs_as_is(boot: Callable[..., Cell]) -> None:
    from nodmix.sandbox import wrap_async

    outcome = boot().run(wrap_async("return 5"), wrapped=True)
    assert outcome == Completed("5")


def test_a_finished_cell_frees_its_vm(boot: Callable[..., Cell]) -> None:
    cell = boot()
    cell.run("globalThis.big = 'x'.repeat(1 << 20); return 1")
    assert cell._vm.closed
    assert cell.memory_bytes > 1 << 20


def test_a_suspended_cell_can_be_closed_and_is_a_context_manager(
    boot: Callable[..., Cell],
) -> None:
    from nodmix.errors import SandboxError

    with boot() as cell:
        assert cell.run("await host.request('slow', 1)").__class__.__name__ == "Pending"
    assert cell._vm.closed
    with pytest.raises(SandboxError):
        cell.snapshot()


def test_a_dropped_suspended_cell_is_freed_without_the_cycle_collector(
    boot: Callable[..., Cell],
) -> None:
    import gc
    import weakref

    gc.disable()
    try:
        cell = boot()
        cell.run("await host.request('slow', 1)")
        vm = weakref.ref(cell._vm)
        del cell
        assert vm() is None
    finally:
        gc.enable()


def _nested(depth: int, leaf: str = "0") -> str:
    return f"let v = {leaf}; for (let i = 0; i < {depth}; i++) v = [v];"


def test_a_final_value_nested_to_the_limit_completes(boot: Callable[..., Cell]) -> None:
    value = completed(boot(), _nested(MAX_VALUE_DEPTH) + " return v")
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert (depth, value) == (MAX_VALUE_DEPTH, 0)


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 1, 200_000])
def test_a_final_value_nested_past_the_limit_is_a_stack_failure_naming_the_limit(
    boot: Callable[..., Cell], depth: int
) -> None:
    cell = boot(timeout=5)
    outcome = failed(cell, _nested(depth) + " return {deep: v}")
    assert outcome.kind is FailureKind.STACK
    assert outcome.message == f"RangeError: {TOO_DEEP}"
    assert str(MAX_VALUE_DEPTH) in outcome.message


def test_a_request_payload_nested_past_the_limit_rejects_in_the_guest(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    cell = boot(timeout=5)
    source = (
        _nested(100_000)
        + """
    try { await host.request('echo', {v}); return 'sent'; }
    catch (e) { return [e.name, e.message]; }"""
    )
    assert completed(cell, source) == ["RangeError", TOO_DEEP]
    assert recorder.seen_requests == []


def test_shared_and_sibling_objects_do_not_add_up_to_depth(boot: Callable[..., Cell]) -> None:
    # Depth is the nesting of one path, not the number of objects: many wide siblings and a
    # shared object referenced from every element are fine.
    source = """
    const shared = {a: {b: {c: 1}}};
    const rows = [];
    for (let i = 0; i < 2000; i++) rows.push({i, shared, e: new Error('x'), n: 1n});
    return rows"""
    rows = completed(boot(), source)
    assert isinstance(rows, list) and len(rows) == 2000
    assert rows[-1] == {
        "i": 1999,
        "shared": {"a": {"b": {"c": 1}}},
        "e": {"name": "Error", "message": "x"},
        "n": "1",
    }
