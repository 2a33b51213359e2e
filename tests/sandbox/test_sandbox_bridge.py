"""The generic host bridge: synchronous calls, async requests, isolation of the capability."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from nodmix.errors import SandboxError
from nodmix.sandbox import (
    Cell,
    Completed,
    Failed,
    FailureKind,
    HostCallError,
    Pending,
    QuickJSRuntime,
)

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration


def test_a_host_call_round_trips_json(boot: Callable[..., Cell], recorder: Recorder) -> None:
    outcome = boot().run("return host.call('echo', {a: [1, 'two']})")
    assert outcome == Completed('{"a":[1,"two"]}')
    assert recorder.seen_calls == [("echo", '{"a":[1,"two"]}')]


def test_a_host_call_returning_none_is_undefined_in_the_guest(
    boot: Callable[..., Cell],
) -> None:
    assert boot().run("return typeof host.call('nothing', 1)") == Completed('"undefined"')


def test_calls_and_requests_without_a_result_stay_undefined_across_deliveries_and_restore(
    boot: Callable[..., Cell], recorder: Recorder, runtime: QuickJSRuntime, setup_script: str
) -> None:
    # After a delivery the host answers "no result" with the box of an earlier `settle`
    # result; the guest must still see undefined, also in a cell restored from a snapshot.
    source = """
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const v = await host.request('slow', i);
      seen.push(v, typeof host.call('nothing', i));
    }
    return seen"""
    cell = boot()
    outcome = cell.run(source)
    for n in range(4):
        assert isinstance(outcome, Pending)
        (request_id,) = outcome.request_ids
        if n == 2:
            blob = cell.snapshot()
            cell.close()
            cell = Cell.restore(blob, recorder, runtime=runtime, setup_script=setup_script)
        outcome = cell.resume([(request_id, True, str(n * 10))])
    assert outcome == Completed('[0,"undefined",10,"undefined",20,"undefined",30,"undefined"]')


def test_a_host_function_may_run_another_cell_and_its_guest_then_goes_on(
    boot: Callable[..., Cell],
) -> None:
    # Imports (the clock here) find the VM that called them; a cell run from inside another
    # cell's host function must leave the outer one finding itself again.
    inner = boot()

    class Outer:
        def on_call(self, op: str, payload_json: str) -> str:
            outcome = inner.run("return [6 * 7, typeof Date.now()]")
            assert isinstance(outcome, Completed)
            return outcome.value_json

        def on_request(self, request_id: int, op: str, payload_json: str) -> None:
            return None

    source = "const r = host.call('inner', 1); return [r, Date.now() > 0, typeof Date.now()]"
    assert boot(handler=Outer()).run(source) == Completed('[[42,"number"],true,"number"]')


def test_a_host_call_error_becomes_a_catchable_plain_error(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    recorder.calls["deny"] = HostCallError("not allowed here")
    source = """
    try { host.call('deny', {}); return 'no error'; }
    catch (e) {
      return [e instanceof Error, e.constructor === Error, e.message, Object.keys(e)];
    }"""
    assert boot().run(source) == Completed('[true,true,"not allowed here",[]]')


def test_an_unexpected_host_exception_fails_the_step_as_internal(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    recorder.calls["bug"] = KeyError("secret detail")
    outcome = boot().run("try { host.call('bug', 1) } catch (e) { return e.message }")
    assert outcome == Failed(FailureKind.INTERNAL, "host handler failed: KeyError")


def test_a_request_settled_inline_resolves_without_a_pending_step(
    boot: Callable[..., Cell],
) -> None:
    outcome = boot().run("const r = await host.request('echo', {n: 1}); return r.n + 1")
    assert outcome == Completed("2")


def test_a_request_that_the_handler_rejects_inline_is_catchable(
    boot: Callable[..., Cell],
) -> None:
    source = "try { await host.request('boom', 1) } catch (e) { return e.message }"
    assert boot().run(source) == Completed('"boom failed"')


def test_a_pending_request_is_settled_later_by_deliver(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    cell = boot()
    outcome = cell.run("const v = await host.request('slow', {q: 'x'}); return v.answer * 2")
    assert isinstance(outcome, Pending)
    (request_id,) = outcome.request_ids
    assert recorder.payload(request_id) == {"q": "x"}
    cell.deliver(request_id, True, '{"answer": 21}')
    assert cell.pump() == Completed("42")


def test_parallel_requests_are_all_reported_and_settle_in_any_order(
    boot: Callable[..., Cell],
) -> None:
    cell = boot()
    source = "const [a, b, c] = await Promise.all(['x', 'y', 'z'].map(k => host.request(k, k)));"
    outcome = cell.run(source + "\nreturn a + b + c")
    assert isinstance(outcome, Pending)
    assert len(outcome.request_ids) == 3
    first, second, third = outcome.request_ids
    cell.deliver(third, True, '"3"')
    cell.deliver(first, True, '"1"')
    assert cell.pump() == Pending((second,))
    cell.deliver(second, True, '"2"')
    assert cell.pump() == Completed('"123"')


def test_resume_delivers_several_results_and_pumps_in_one_step(
    boot: Callable[..., Cell],
) -> None:
    cell = boot()
    source = "const [a, b, c] = await Promise.all(['x', 'y', 'z'].map(k => host.request(k, k)));"
    outcome = cell.run(source + "\nreturn a + b + c")
    assert isinstance(outcome, Pending)
    first, second, third = outcome.request_ids
    assert cell.resume([(third, True, '"3"'), (first, True, '"1"')]) == Pending((second,))
    assert cell.resume([(second, True, '"2"')]) == Completed('"123"')


def test_a_large_delivery_arrives_whole(boot: Callable[..., Cell]) -> None:
    cell = boot()
    outcome = cell.run("const v = await host.request('slow', 1); return [v.length, v.at(-1)]")
    assert isinstance(outcome, Pending)
    text = "é" * 150_000 + "!"  # ~900 KB of JSON: copied in without holding the GIL
    assert cell.resume([(outcome.request_ids[0], True, json.dumps(text))]) == Completed(
        '[150001,"!"]'
    )


def test_resume_with_a_bad_id_delivers_nothing(boot: Callable[..., Cell]) -> None:
    cell = boot()
    outcome = cell.run(
        "const [a, b] = await Promise.all([host.request('x', 1), host.request('y', 2)]);"
        "\nreturn a + b"
    )
    assert isinstance(outcome, Pending)
    first, second = outcome.request_ids
    with pytest.raises(SandboxError, match="999"):
        cell.resume([(first, True, "1"), (999, True, "1")])
    with pytest.raises(SandboxError, match="twice"):
        cell.resume([(first, True, "1"), (first, True, "1")])
    assert cell.outstanding == (first, second)  # nothing was forgotten
    assert cell.resume([(first, True, "1"), (second, True, "2")]) == Completed("3")


def test_a_rejected_delivery_is_caught_by_the_guest(boot: Callable[..., Cell]) -> None:
    cell = boot()
    source = """
    try { await host.request('slow', 1); return 'resolved'; }
    catch (e) { return e instanceof Error ? 'caught: ' + e.message : 'odd'; }"""
    outcome = cell.run(source)
    assert isinstance(outcome, Pending)
    cell.deliver(outcome.request_ids[0], False, "tool exploded")
    assert cell.pump() == Completed('"caught: tool exploded"')


def test_invalid_json_from_the_host_rejects_the_request(boot: Callable[..., Cell]) -> None:
    cell = boot()
    outcome = cell.run("try { await host.request('slow', 1) } catch (e) { return e.message }")
    assert isinstance(outcome, Pending)
    cell.deliver(outcome.request_ids[0], True, "{not json")
    assert cell.pump() == Completed('"the host delivered invalid JSON"')


def test_an_unserializable_request_payload_rejects_without_reaching_the_host(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    source = "const a = {}; a.a = a; try { await host.request('x', a) } catch (e) { return e.name }"
    assert boot().run(source) == Completed('"TypeError"')
    assert recorder.seen_requests == []


def test_delivering_an_unknown_request_id_raises(boot: Callable[..., Cell]) -> None:
    cell = boot()
    assert isinstance(cell.run("await host.request('slow', 1)"), Pending)
    with pytest.raises(SandboxError):
        cell.deliver(999, True, "1")


def test_a_promise_nothing_can_settle_is_reported_as_stalled(boot: Callable[..., Cell]) -> None:
    outcome = boot().run("await new Promise(() => {})")
    assert isinstance(outcome, Failed)
    assert outcome.kind is FailureKind.STALLED


def test_the_capability_and_bridge_are_not_reachable_from_guest_globals(
    boot: Callable[..., Cell],
) -> None:
    source = r"""
    const names = Object.getOwnPropertyNames(globalThis);
    const suspicious = names.filter(n => /host|bridge|^cap|nodmix|settle|request|^call/i.test(n));
    const found = [];
    for (const n of names) {
      let v; try { v = globalThis[n]; } catch (e) { continue; }
      if (typeof v === 'function' && /hostCall|hostRequest|settle/.test(String(v))) found.push(n);
    }
    const probes = ['cap', 'call', 'request', 'settle', '__cm_host', 'hostCall', 'hostRequest',
                    'nodmix', 'bridge', 'finish', 'describe'].filter(n => n in globalThis);
    const hostKeys = Object.keys(host), extensible = Object.isExtensible(host);
    return { suspicious, found, probes, hostKeys, extensible };
    """
    value = boot().run(source)
    assert isinstance(value, Completed)
    assert value.value() == {
        "suspicious": ["host"],
        "found": [],
        "probes": [],
        "hostKeys": ["call", "request"],
        "extensible": False,
    }


def test_stack_traces_cannot_leak_bridge_functions(boot: Callable[..., Cell]) -> None:
    source = """
    const leaked = [];
    const spy = (e, sites) => { leaked.push(sites.map(s => s.getFunction())); return 'x'; };
    try { Error.prepareStackTrace = spy; } catch (e) { leaked.push('blocked: ' + e.name); }
    try { await host.request('boom', 1) } catch (e) { }
    return [typeof Error.prepareStackTrace, leaked.length];
    """
    assert boot().run(source) == Completed('["undefined",0]')


def test_monkey_patching_intrinsics_does_not_break_the_bridge(
    boot: Callable[..., Cell],
) -> None:
    cell = boot()
    source = """
    JSON.parse = () => 'patched'; JSON.stringify = () => '"patched"';
    Map.prototype.get = () => undefined; Map.prototype.set = () => {};
    String.prototype.slice = () => 'patched'; String.prototype.charCodeAt = () => 1;
    Function.prototype.call = () => { throw new Error('patched call'); };
    globalThis.Promise = function () { throw new Error('patched Promise'); };
    globalThis.Error = function () { return 'patched Error'; };
    const value = await host.request('slow', {keep: true});
    let failure = null;
    try { await host.request('slow', 2); } catch (e) { failure = e.message; }
    return [value, failure];
    """
    outcome = cell.run(source)
    assert isinstance(outcome, Pending)
    cell.deliver(outcome.request_ids[0], True, '{"real": 1}')
    outcome = cell.pump()
    assert isinstance(outcome, Pending)
    cell.deliver(outcome.request_ids[0], False, "still a real error")
    outcome = cell.pump()
    assert isinstance(outcome, Completed)
    assert json.loads(outcome.value_json) == [{"real": 1}, "still a real error"]


def test_a_cell_without_a_setup_script_exposes_no_bridge(boot: Callable[..., Cell]) -> None:
    assert boot(setup=None).run("return typeof host") == Completed('"undefined"')


def test_a_broken_setup_script_fails_the_boot(boot: Callable[..., Cell]) -> None:
    with pytest.raises(SandboxError, match="sandbox setup failed: ReferenceError"):
        boot(setup="(cap) => { missing(); }")
