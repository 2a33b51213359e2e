"""TypeScript cells through the OXC transform."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

from nodmix.sandbox import Cell, Completed, Failed, TypeScriptTransformError, transform_typescript

pytestmark = pytest.mark.integration

TS_CELL = """
enum Color { Red, Green = 5, Blue }
const enum Flag { On = 1 }
namespace Geometry {
  export const twice = (n: number): number => n * 2;
  export namespace Deep { export const label: string = 'deep'; }
}
namespace Geometry { export const thrice = (n: number) => n * 3; }
namespace OnlyTypes { export type Id = string; }
interface Shape { area(): number }
type Pair<T> = [T, T];
class Rect implements Shape {
  constructor(public readonly w: number, private h: number) {}
  area(): number { return this.w * this.h; }
}
function first<T>(pair: Pair<T>): T { return pair[0]!; }
const r = new Rect(3, 4) as Shape;
const answer = await Promise.resolve<number>(first<number>([Geometry.twice(21), 0]));
return {
  blue: Color.Blue, name: Color[5], flag: Flag.On, area: r.area(),
  answer, thrice: Geometry.thrice(2), deep: Geometry.Deep.label,
};
"""


def test_a_typescript_cell_with_enums_namespaces_and_parameter_properties_runs(
    boot: Callable[..., Cell],
) -> None:
    js = transform_typescript(TS_CELL)
    outcome = boot().run(js, filename="cell.ts", wrapped=True)
    assert isinstance(outcome, Completed), outcome
    assert outcome.value() == {
        "blue": 6,
        "name": "Green",
        "flag": 1,
        "area": 12,
        "answer": 42,
        "thrice": 6,
        "deep": "deep",
    }


def test_a_namespace_inside_a_block_is_lowered_too(boot: Callable[..., Cell]) -> None:
    js = transform_typescript("if (true) { namespace N { export const v = 7 } return N.v }")
    assert boot().run(js, wrapped=True) == Completed("7")


def test_strings_that_look_like_namespaces_are_untouched(boot: Callable[..., Cell]) -> None:
    js = transform_typescript("const s: string = 'namespace X {'; return s")
    assert boot().run(js, wrapped=True) == Completed('"namespace X {"')


def test_typescript_syntax_errors_become_readable_diagnostics() -> None:
    with pytest.raises(TypeScriptTransformError) as info:
        transform_typescript("const x: = 1", filename="task.ts")
    assert str(info.value) == "TypeScript syntax error in task.ts: Unexpected token"
    assert info.value.diagnostics


def test_hostile_typescript_input_only_fails_the_transform() -> None:
    with pytest.raises(TypeScriptTransformError, match="TypeScript transform"):
        transform_typescript("(" * 200_000 + "1" + ")" * 200_000)
    assert "return 1;" in transform_typescript("return 1 as number")  # still usable


def test_a_runtime_error_in_a_typescript_cell_is_reported(boot: Callable[..., Cell]) -> None:
    js = transform_typescript("const n: number = 1;\n(n as any)();")
    outcome = boot().run(js, filename="cell.ts", wrapped=True)
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("TypeError: not a function")


def test_javascript_cells_never_load_the_typescript_transform() -> None:
    script = textwrap.dedent(
        """
        import sys
        import nodmix.sandbox as sandbox

        class Handler:
            def on_call(self, op, payload): return None
            def on_request(self, request_id, op, payload): return None

        cell = sandbox.Cell.boot(None, Handler())
        assert cell.run("return 1").value_json == "1"
        assert "nodmix.sandbox.typescript" not in sys.modules
        assert not any("transform" in name for name in sys.modules if name.startswith("quickjs_rs"))
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
