"""Cells copied from a boot template: fresh and isolated, with their own clocks and randomness."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from nodmix.errors import SandboxError
from nodmix.sandbox import Cell, Completed, QuickJSRuntime, templates
from nodmix.sandbox.bootstate import MONOTONIC, Fixup, Kind, Probe, explain, js_number_bytes
from nodmix.sandbox.vm import VM

if TYPE_CHECKING:
    from conftest import Recorder

pytestmark = pytest.mark.integration

ASKING_SETUP = """(cap) => {
  const name = cap.call('boot', '');
  Object.defineProperty(globalThis, 'bootName', { value: name, enumerable: false });
}"""


@pytest.fixture(autouse=True)
def fresh_templates() -> Iterator[None]:
    """Each test starts without templates (and leaves none behind)."""
    templates.clear()
    yield
    templates.clear()


def value(cell: Cell, source: str) -> object:
    outcome = cell.run(source)
    assert isinstance(outcome, Completed), outcome
    return outcome.value()


def test_cells_are_copied_from_one_template_built_on_first_use(
    boot: Callable[..., Cell],
) -> None:
    first, second = boot(), boot()
    assert first._template is not None
    assert first._template is second._template
    assert value(first, "return typeof host.call") == "function"


def test_two_cells_from_one_template_draw_different_random_numbers(
    boot: Callable[..., Cell],
) -> None:
    program = "return Array.from({length: 4}, () => Math.random())"
    one, two = value(boot(), program), value(boot(), program)
    assert one != two


def test_a_global_set_in_one_cell_is_absent_in_the_next(boot: Callable[..., Cell]) -> None:
    assert value(boot(), "globalThis.leak = 42; Object.prototype.polluted = 1; return leak") == 42
    assert value(boot(), "return [typeof leak, typeof ({}).polluted]") == ["undefined", "undefined"]


def test_performance_now_starts_near_zero_in_a_cell_made_long_after_its_template(
    boot: Callable[..., Cell], monkeypatch: pytest.MonkeyPatch
) -> None:
    boot().close()  # the template now holds this moment's time origin
    real = VM.clock_ns
    hour = 3600 * 10**9

    def an_hour_later(self: VM, clock_id: int) -> int:
        return real(self, clock_id) + (hour if clock_id == MONOTONIC else 0)

    monkeypatch.setattr(VM, "clock_ns", an_hour_later)
    now, origin = value(boot(), "return [performance.now(), performance.timeOrigin]")  # type: ignore[misc]
    assert 0 <= now < 1000
    assert abs(origin - (time.monotonic_ns() + hour) / 1e6) < 1000


def test_date_now_is_the_real_time_in_a_copied_cell(boot: Callable[..., Cell]) -> None:
    boot().close()
    assert abs(value(boot(), "return Date.now()") - time.time() * 1000) < 1000  # type: ignore[operator]


def test_the_setup_is_asked_once_per_cell_and_its_answers_pick_the_template(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    recorder.calls["boot"] = "alpha"
    a1 = boot(setup=ASKING_SETUP)
    a2 = boot(setup=ASKING_SETUP)
    assert recorder.seen_calls == [("boot", ""), ("boot", "")]
    recorder.calls["boot"] = "beta"
    b = boot(setup=ASKING_SETUP)
    assert a1._template is a2._template is not b._template
    assert [value(a1, "return bootName"), value(b, "return bootName")] == ["alpha", "beta"]


def test_a_setup_that_makes_requests_boots_without_a_template(
    boot: Callable[..., Cell], recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    setup = "(cap) => { globalThis.early = cap.request('echo', 5); }"
    with caplog.at_level(logging.INFO, logger="nodmix.sandbox"):
        cells = [boot(setup=setup) for _ in range(3)]
    assert all(cell._template is None for cell in cells)
    assert value(cells[0], "return await early") == 5
    assert [r.message for r in caplog.records].count(
        "sandbox cells for this setup boot without a template: "
        "the setup makes requests or changes between boots"
    ) == 1
    assert len(recorder.seen_requests) == 3  # one real request per cell, none from probing


def test_boot_state_that_no_reading_explains_refuses_the_template() -> None:
    a, b = Probe(), Probe(shift_ns=10**12)
    a.clock_ns(MONOTONIC)
    b.clock_ns(MONOTONIC)
    origin_a = js_number_bytes(a.readings[0][1] / 1e6)
    origin_b = js_number_bytes(b.readings[0][1] / 1e6)
    mem_a = bytearray(64)
    mem_b = bytearray(64)
    mem_a[16:24], mem_b[16:24] = origin_a, origin_b

    assert explain(bytes(mem_a), bytes(mem_b), a, b) == (
        [Fixup(16, 8, Kind.TIME_ORIGIN_VALUE)],
        None,
    )
    mem_b[40] = 1  # something else differs between the two boots
    assert explain(bytes(mem_a), bytes(mem_b), a, b)[1] == 40


def test_a_template_is_rebuilt_identically_from_the_same_setup_and_answers(
    boot: Callable[..., Cell], runtime: QuickJSRuntime
) -> None:
    digest = boot()._template.digest  # type: ignore[union-attr]
    templates.clear()
    assert boot()._template.digest == digest  # type: ignore[union-attr]
    assert templates.find(digest) is not None


def test_a_handler_that_breaks_while_the_setup_asks_fails_the_boot_as_before(
    boot: Callable[..., Cell], recorder: Recorder
) -> None:
    recorder.calls["boot"] = "alpha"
    boot(setup=ASKING_SETUP).close()  # the template exists: its question is asked directly
    recorder.calls["boot"] = RuntimeError("catalog unavailable")
    with pytest.raises(SandboxError, match="sandbox setup failed"):
        boot(setup=ASKING_SETUP)


WORKLOAD = """
const m = new Map(), s = new Set(), w = new WeakMap(), keep = [];
for (let i = 0; i < 3000; i++) {
  const o = { ['k' + i]: i };
  m.set('k' + i, i); s.add(i * 7); w.set(o, i); keep.push(o);
}
let sum = 0;
for (let i = 0; i < 3000; i++) sum += m.get('k' + i) + (s.has(i * 7) ? 1 : 0) + w.get(keep[i]);
m.delete('k5');
const sym = Symbol.for('shared');
let caught = '';
try { null.x; } catch (e) { caught = e.constructor.name; }
return {
  sum, size: m.size, sym: Symbol.keyFor(sym), caught,
  json: JSON.stringify({ a: [1, 'two', { three: 3 }] }),
  re: 'a1b22c333'.replace(/\\d+/g, (d) => d.length),
  date: new Date(0).toISOString(), big: (2n ** 70n).toString(),
  sorted: [5, 3, 9, 1].sort((a, b) => a - b),
};
"""


def test_a_copied_cell_computes_what_a_freshly_booted_cell_computes(
    boot: Callable[..., Cell], monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = boot()
    assert copied._template is not None
    from_template = value(copied, WORKLOAD)
    monkeypatch.setattr(templates, "acquire", lambda _rt, _setup, handler, _boot: (None, handler))
    fresh = boot()
    assert fresh._template is None
    assert value(fresh, WORKLOAD) == from_template
