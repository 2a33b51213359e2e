"""Habits of model-written programs in a real cell: console output, timers and `sleep`, the web
globals QuickJS lacks, and uncaught errors located in the program (JavaScript and TypeScript)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager

from .support import Gate, Harness, build_harness, code_mode, text_tool


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, **kwargs: Any
) -> Harness:
    return await build_harness(
        engine, sessions, workspace, extra_tools=[text_tool("lookup", "found")], **kwargs
    )


def _texts(result: dict[str, Any]) -> list[str]:
    return [item["text"] if item["type"] == "text" else item for item in result.get("output", [])]


@pytest.mark.anyio
async def test_console_methods_become_text_output_in_order_with_text_and_json(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    result = await h.exec(
        """
        console.log('plain', 42, { a: 1, b: 'x', c: [1, 2, { d: null }] }, [1, 2, 3]);
        text('between');
        console.info('%s has %d items and %j', 'cart', 3, { ok: true });
        console.warn(new Map([['k', 1]]), new Set([1]), -0, 10n, undefined, null);
        json({ n: 1 });
        console.error(new TypeError('bad thing'));
        console.debug({ 'a-b': 1, nested: { deep: { deeper: { deepest: 1 } } } });
        console.log(function named() {}, class Thing {}, "it's");
        return 'done';
        """
    )
    assert result["status"] == "completed", result
    assert _texts(result) == [
        "plain 42 { a: 1, b: 'x', c: [ 1, 2, { d: null } ] } [ 1, 2, 3 ]",
        "between",
        'cart has 3 items and {"ok":true}',
        "Map(1) { 'k' => 1 } Set(1) { 1 } -0 10n undefined null",
        {"type": "json", "value": {"n": 1}},
        "TypeError: bad thing",
        "{ 'a-b': 1, nested: { deep: { deeper: [Object] } } }",
        "[Function: named] [class Thing] it's",
    ]


@pytest.mark.anyio
async def test_console_joins_strings_and_numbers_like_node_whatever_the_argument_count(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    result = await h.exec(
        """
        for (const v of [1, 0, -0, 2.5, NaN, -Infinity, 'word']) console.log('v', v);
        console.log('a', 'b', 3, -0, 0, 1e21, 'c');
        console.log('100%', 5);
        console.log('%d%%', 50, 'left');
        console.log('v %d', 8);
        console.log('v', 7);
        console.log('x', { y: 1 }, 2);
        console.log(3, 'three');
        """
    )
    assert result["status"] == "completed", result
    assert _texts(result) == [
        "v 1",
        "v 0",
        "v -0",
        "v 2.5",
        "v NaN",
        "v -Infinity",
        "v word",
        "a b 3 -0 0 1e+21 c",
        "100% 5",
        "50% left",
        "v 8",
        "v 7",
        "x { y: 1 } 2",
        "3 three",
    ]


@pytest.mark.anyio
async def test_console_breaks_long_objects_over_lines_and_supports_groups_count_and_table(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    result = await h.exec(
        """
        const rows = Array.from({ length: 3 }, (_, i) => ({ id: i, name: 'user-' + i,
          email: 'user' + i + '@example.com' }));
        console.log(rows);
        console.group('Totals');
        console.count(); console.count();
        console.groupEnd();
        console.assert(1 === 2, 'math', 'broke');
        console.table([{ a: 1, b: 2 }, { a: 3 }]);
        """
    )
    texts = _texts(result)
    assert texts[0] == (
        "[\n  { id: 0, name: 'user-0', email: 'user0@example.com' },\n"
        "  { id: 1, name: 'user-1', email: 'user1@example.com' },\n"
        "  { id: 2, name: 'user-2', email: 'user2@example.com' }\n]"
    )
    assert texts[1:4] == ["Totals", "  default: 1", "  default: 2"]
    assert texts[4] == "Assertion failed: math broke"
    assert texts[5].splitlines()[1] == "│ (index) │ a │ b │"


@pytest.mark.anyio
async def test_console_output_counts_against_max_output_bytes(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine, sessions, workspace, code_mode_config=code_mode(max_output_bytes=2048)
    )
    result = await h.exec("for (let i = 0; i < 1000; i++) console.log('line ' + i); return 1")
    assert result["status"] == "failed" and result["code"] == "output_limit_exceeded"
    error = result["error"]
    assert "console output had written" in error and "2,048-byte limit (maxOutputBytes)" in error
    assert "Print less" in error and error != "code mode output limit exceeded."


@pytest.mark.anyio
async def test_timers_fire_in_due_order_and_cleared_ones_never_run(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const order = [];
        setTimeout(() => order.push('late'), 30);
        setTimeout((a, b) => order.push('early ' + a + b), 5, 'x', 'y');
        const never = setTimeout(() => order.push('cleared'), 1);
        clearTimeout(never);
        let ticks = 0;
        await new Promise(resolve => {
          const id = setInterval(() => {
            ticks++;
            if (ticks === 3) { clearInterval(id); resolve(); }
          }, 2);
        });
        queueMicrotask(() => order.push('micro'));
        await sleep(40);
        return { order, ticks };
        """
    )
    assert value == {"order": ["early xy", "micro", "late"], "ticks": 3}


@pytest.mark.anyio
async def test_a_cleared_long_timer_does_not_keep_the_run_open(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace, code_mode_config=code_mode(timeout_ms=200))
    result = await h.exec(
        """
        const t = setTimeout(() => {}, 60000);
        const slow = new Promise(res => setTimeout(res, 50000));
        const r = await Promise.race([tools.lookup({}), slow]);
        clearTimeout(t);
        return r.text;
        """
    )
    assert result["status"] == "completed" and result["value"] == "found", result


@pytest.mark.anyio
async def test_a_timer_past_the_step_budget_suspends_and_wait_continues_it(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace, code_mode_config=code_mode(timeout_ms=100))
    results = await h.run_to_end(
        "console.log('before'); await sleep(250); console.log('after'); return 'slept'"
    )
    assert results[0]["status"] == "waiting" and results[0]["reason"] == "pending_tools"
    assert "pendingToolCalls" not in results[0]  # a timer is not a tool call
    assert results[-1]["status"] == "completed" and results[-1]["value"] == "slept"
    assert _texts(results[-1])[-1] == "after"


@pytest.mark.anyio
async def test_an_exception_in_a_timer_callback_is_reported_and_the_program_goes_on(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    result = await h.exec(
        "setTimeout(() => { throw new RangeError('tick failed') }, 1); await sleep(10); return 2"
    )
    assert result["value"] == 2 and _texts(result) == ["Uncaught RangeError: tick failed"]
    bad = await h.exec("setTimeout('not a function', 1)")
    assert bad["code"] == "guest_error" and "must be a function" in bad["error"]


@pytest.mark.anyio
async def test_web_globals_behave_like_the_platform_ones(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const u = new URL('https://User:pw@Example.COM:443/a/b/../c?x=1&y=two words#top');
        u.searchParams.append('z', 'a b');
        const rel = new URL('../d?q=1', 'http://h.test/a/b/c');
        const qs = new URLSearchParams({ q: 'café & tea', page: 2 });
        const bytes = new TextEncoder().encode('héllo €😀');
        const original = { when: new Date(0), tags: new Set(['a']), nested: { list: [1, 2] } };
        const copy = structuredClone(original);
        copy.nested.list.push(3);
        let cloneError = null;
        try { structuredClone({ f() {} }); } catch (e) { cloneError = e.name; }
        return {
          href: u.href, host: u.host, path: u.pathname, y: u.searchParams.get('y'),
          origin: u.origin, rel: rel.href, qs: qs.toString(),
          back: [...new URLSearchParams(qs.toString())],
          len: bytes.length, text: new TextDecoder().decode(bytes),
          cloned: [copy.when instanceof Date, copy.tags.has('a'), original.nested.list.length],
          cloneError, b64: atob(btoa('hi')), micro: typeof queueMicrotask,
        };
        """
    )
    assert value == {
        "href": "https://User:pw@example.com/a/c?x=1&y=two+words&z=a+b#top",
        "host": "example.com",
        "path": "/a/c",
        "y": "two words",
        "origin": "https://example.com",
        "rel": "http://h.test/a/d?q=1",
        "qs": "q=caf%C3%A9+%26+tea&page=2",
        "back": [["q", "café & tea"], ["page", "2"]],
        "len": 14,
        "text": "héllo €😀",
        "cloned": [True, True, 2],
        "cloneError": "DataCloneError",
        "b64": "hi",
        "micro": "function",
    }


@pytest.mark.anyio
async def test_uncaught_errors_carry_name_message_and_the_programs_line_and_column(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    first_line = await h.exec("undefinedThing();")
    assert first_line["code"] == "guest_error"
    assert first_line["error"] == "ReferenceError: undefinedThing is not defined (at cell.js:1:1)"
    assert first_line["guestError"] == {
        "name": "ReferenceError",
        "message": "undefinedThing is not defined",
        "line": 1,
        "column": 1,
    }
    later = await h.exec("const a = 1;\nconst b = a + 1;\n  null.boom;\n")
    assert later["guestError"]["name"] == "TypeError"
    assert (later["guestError"]["line"], later["guestError"]["column"]) == (3, 3)


@pytest.mark.anyio
async def test_typescript_errors_are_mapped_back_to_the_typescript_source(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    source = (
        "interface Row {\n"
        "  id: number;\n"
        "  name: string;\n"
        "}\n"
        "function first<T>(items: T[]): T { return items[0]; }\n"
        "const rows: Row[] = [{ id: 1, name: 'a' }];\n"
        "const row = first<Row>(rows);\n"
        "if (row.id > 0) {\n"
        "  throw new RangeError(`bad row ${row.name}`);\n"
        "}\n"
    )
    result = await h.exec(source, language="typescript")
    assert result["code"] == "guest_error"
    # The same program without types, as JavaScript: the error sits at the same place.
    plain = await h.exec(
        "\n\n\n\n"
        "function first(items) { return items[0]; }\n"
        "const rows = [{ id: 1, name: 'a' }];\n"
        "const row = first(rows);\n"
        "if (row.id > 0) {\n"
        "  throw new RangeError(`bad row ${row.name}`);\n"
        "}\n"
    )
    assert result["guestError"] == plain["guestError"]
    assert result["guestError"]["name"] == "RangeError" and result["guestError"]["line"] == 9
    column = result["guestError"]["column"]
    assert result["error"] == f"RangeError: bad row a (at cell.ts:9:{column})"
    missing = await h.exec(
        "type P = { x: number };\nconst p: P = { x: 1 };\n\nconsole.log(p.x);\nmissingFn(p);\n",
        language="typescript",
    )
    assert (missing["guestError"]["line"], missing["guestError"]["column"]) == (5, 1)


@pytest.mark.anyio
async def test_a_returned_value_over_max_output_bytes_says_its_size_and_how_to_return_less(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine, sessions, workspace, code_mode_config=code_mode(max_output_bytes=1024)
    )
    result = await h.exec("return Array.from({ length: 500 }, (_, i) => ({ id: i }))")
    assert result["code"] == "output_limit_exceeded"
    assert "is 5,391 bytes of JSON, over the 1,024-byte limit" in result["error"]
    assert ".slice(0, 20)" in result["error"]


@pytest.mark.anyio
async def test_console_lines_keep_their_order_around_calls_and_survive_a_timeout(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace, code_mode_config=code_mode(timeout_ms=300))
    ordered = await h.exec(
        """
        for (let i = 0; i < 300; i++) console.log('a' + i);
        const r = await tools.lookup({});
        console.log('after', r.text);
        text('t');
        console.log('last');
        """
    )
    assert _texts(ordered) == [f"a{i}" for i in range(300)] + ["after found", "t", "last"]
    spun = await h.exec("console.log('progress: starting'); while (true) {}")
    assert spun["code"] == "timeout" and _texts(spun) == ["progress: starting"]


@pytest.mark.anyio
async def test_a_suspended_run_carries_only_the_guest_scripts_it_used(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool],
        code_mode_config=code_mode(timeout_ms=500),
    )
    sizes = []
    for prelude in ("", "console.log('x', 1); new URL('http://a/b'); await API.list(); "):
        parked = await h.exec(prelude + "return (await tools.slow({})).text")
        assert parked["status"] == "waiting", parked
        stored = engine.store.get(parked["runId"])
        assert stored is not None
        sizes.append(len(stored.snapshot))
        gate.release.set()
        assert (await h.wait(parked["runId"]))["status"] == "completed"
        gate.release = anyio.Event()
    plain, used = sizes
    assert used - plain > 8 * 1024, sizes  # console, the web globals and API.read/list
