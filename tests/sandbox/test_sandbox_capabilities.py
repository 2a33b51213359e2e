"""The guest has no capabilities: no modules, no I/O, no host objects."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nodmix.sandbox import MODULE_ACCESS_DENIED, Cell, Completed, Failed, find_module_access

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "name",
    [
        "require",
        "process",
        "fetch",
        "setTimeout",
        "setInterval",
        "console",
        "WebAssembly",
        "XMLHttpRequest",
        "WebSocket",
        "Deno",
        "Bun",
        "std",
        "os",
        "print",
        "scriptArgs",
        "module",
        "exports",
        "importScripts",
        "navigator",
        "location",
        "environ",
    ],
)
def test_host_capabilities_are_absent(boot: Callable[..., Cell], name: str) -> None:
    assert boot().run(f"return typeof globalThis[{name!r}]") == Completed('"undefined"')


def test_require_is_not_defined(boot: Callable[..., Cell]) -> None:
    outcome = boot().run("require('fs')")
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("ReferenceError: require is not defined")


@pytest.mark.parametrize("specifier", ["qjs:std", "qjs:os", "./local.js", "fs", "node:fs"])
def test_dynamic_import_is_refused_for_every_specifier(
    boot: Callable[..., Cell], specifier: str
) -> None:
    outcome = boot().run(f"await import({specifier!r})")
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("ReferenceError: could not load module")


def test_import_through_eval_and_function_is_refused(boot: Callable[..., Cell]) -> None:
    source = """
    const results = [];
    const attempts = [
      () => eval("imp" + "ort('qjs:std')"),
      () => new Function("return import('qjs:os')")(),
    ];
    for (const make of attempts) {
      try { await make(); results.push('loaded'); } catch (e) { results.push(e.name); }
    }
    return results;"""
    assert boot().run(source) == Completed('["ReferenceError","ReferenceError"]')


def test_a_static_import_is_a_syntax_error_in_a_cell(boot: Callable[..., Cell]) -> None:
    outcome = boot().run("import * as std from 'qjs:std';\nreturn std")
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("SyntaxError")


def test_the_guest_cannot_read_the_environment_or_the_clock_zone(
    boot: Callable[..., Cell],
) -> None:
    source = "return [typeof process, new Date(86400000).toISOString(), Intl === undefined]"
    outcome = boot().run(source.replace("Intl === undefined", "typeof Intl"))
    assert outcome == Completed('["undefined","1970-01-02T00:00:00.000Z","undefined"]')


def test_the_runtime_prints_nowhere(boot: Callable[..., Cell]) -> None:
    cell = boot()
    cell.run("return 1")
    assert cell.stdio == b""


@pytest.mark.parametrize(
    ("source", "kind", "line"),
    [
        ("import fs from 'fs'", "static_import", 1),
        ("const a = 1;\nconst m = await import('x')", "dynamic_import", 2),
        ("const fs = require('fs')", "require", 1),
        ("return import.meta.url", "import_meta", 1),
        ("export * from 'x'", "static_import", 1),
    ],
)
def test_module_access_is_pre_detected_for_a_friendly_error(
    source: str, kind: str, line: int
) -> None:
    found = find_module_access(source)
    assert found is not None
    assert (found.kind, found.line, found.code) == (kind, line, MODULE_ACCESS_DENIED)
    assert "module access is not available" in found.message


@pytest.mark.parametrize(
    "source",
    [
        "return 'please import this'",
        "// require('fs')\nreturn 1",
        "/* import('x') */ return 1",
        "return `import('x') is text`",
        "return obj.require('x')",
        "const important = imports(1)",
        "return /import\\(x\\)/.test(s)",
    ],
)
def test_module_access_detection_ignores_strings_comments_and_methods(source: str) -> None:
    assert find_module_access(source) is None


def test_module_access_detection_sees_code_inside_template_substitutions() -> None:
    found = find_module_access("return `a ${ {b: `c ${ require('d') }`} }`")
    assert found is not None and found.kind == "require"
