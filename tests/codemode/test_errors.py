"""Every code-mode error code, produced by the real sandbox and engine, with messages that say
what to do next. Guest errors read `Name: message`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.codemode import CodeModeEngine, RunStore
from nodmix.sessions import SessionManager

from .support import (
    Gate,
    Harness,
    build_harness,
    code_mode,
    gated_harness,
    harness_with,
    text_tool,
    wait_until,
)

FAILED_KEYS = {"status", "error", "code", "telemetry", "guestError"}


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, **kwargs: Any
) -> Harness:
    return await build_harness(
        engine, sessions, workspace, extra_tools=[text_tool("lookup")], **kwargs
    )


def _failed(result: dict[str, Any], code: str | None) -> str:
    assert result["status"] == "failed", result
    assert result.get("code") == code, result
    assert set(result) - {"output"} <= FAILED_KEYS
    assert result["telemetry"]["visibleTools"] == ["exec", "wait"]
    error = result["error"]
    assert isinstance(error, str) and error
    return error


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({}, "`code` is required"),
        ({"code": "   "}, "`code` is required"),
        ({"code": "return 1", "timeout": 5}, "unknown field(s) timeout"),
        ({"code": "return 1", "command": "return 2"}, "must match"),
        ({"code": "ls -la"}, "exec runs JavaScript, not shell commands"),
        ({"command": "cat notes.txt"}, "tools.call('nodmix:core:exec'"),
    ],
)
async def test_bad_exec_input_is_invalid_input_and_nothing_runs(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    args: dict[str, Any],
    needle: str,
) -> None:
    h = await _harness(engine, sessions, workspace)
    result = await h.exec_args(args)
    assert needle in _failed(result, "invalid_input")


@pytest.mark.anyio
async def test_syntax_errors_are_invalid_input_with_name_and_location(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _failed(await h.exec("return (1 +"), "invalid_input")
    assert error.startswith("SyntaxError: ") and "cell.js:" in error


@pytest.mark.anyio
async def test_uncaught_guest_errors_are_guest_error_reading_name_colon_message(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    assert _failed(await h.exec("throw new TypeError('bad input')"), "guest_error").startswith(
        "TypeError: bad input"
    )
    assert _failed(await h.exec("null.x"), "guest_error").startswith("TypeError: ")
    assert _failed(await h.exec("return missingVariable"), "guest_error").startswith(
        "ReferenceError: missingVariable is not defined"
    )
    assert _failed(
        await h.exec("await tools.lookup({}); throw new Error('late')"), "guest_error"
    ).startswith("Error: late")


@pytest.mark.anyio
@pytest.mark.parametrize("language", ["python", "bash"])
async def test_languages_exec_does_not_run_are_unsupported_language(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, language: str
) -> None:
    h = await _harness(engine, sessions, workspace)
    # The exec schema's enum already excludes these; send them past it the way a hook
    # rewrite or a lenient provider could, straight to the tool.
    result = (
        await h.exec_tool.call({"code": "return 1", "language": language}, h.ctx(h.next_call_id()))
    ).details
    assert language in _failed(result, "unsupported_language")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("languages", "language", "advice"),
    [
        (["javascript"], "typescript", 'pass language "javascript"'),
        (["typescript"], "javascript", 'Pass language "typescript"'),
    ],
)
async def test_a_disabled_language_is_invalid_input_saying_what_to_send_instead(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    languages: list[str],
    language: str,
    advice: str,
) -> None:
    h = await _harness(engine, sessions, workspace, code_mode_config=code_mode(languages=languages))
    error = _failed(await h.exec("return 1", language=language), "invalid_input")
    assert f"language '{language}' is disabled" in error and advice in error


@pytest.mark.anyio
async def test_typescript_syntax_errors_are_typescript_transform_failed(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _failed(
        await h.exec("const x: number = ;", language="typescript"), "typescript_transform_failed"
    )
    assert error.startswith("TypeScript: ")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("code", "what"),
    [
        ("import fs from 'fs'; return 1", "an import statement"),
        ("const fs = require('fs'); return fs", "require()"),
        ("const m = await import('node:fs'); return 1", "a dynamic import()"),
        ("return import.meta.url", "import.meta"),
        ("export * from 'x'", "an import statement"),
    ],
)
async def test_module_access_is_refused_before_running(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, code: str, what: str
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _failed(await h.exec(code), "module_access_denied")
    assert what in error and "tools.search/tools.call" in error


@pytest.mark.anyio
async def test_module_access_evading_the_precheck_still_fails_inside_the_sandbox(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const out = {};
        try { await eval("imp" + "ort('fs')"); out.dyn = 'LOADED'; } catch (e) { out.dyn = e.name; }
        try { globalThis['req' + 'uire']('fs'); out.req = 'LOADED'; }
        catch (e) { out.req = e.name; }
        try { new Function('return this.process')().env; out.env = 'READ'; }
        catch (e) { out.env = e.name; }
        return out;
        """
    )
    assert value["dyn"] in {"TypeError", "SyntaxError", "Error", "ReferenceError"}
    assert value["req"] == "TypeError" and value["env"] == "TypeError"


@pytest.mark.anyio
async def test_an_endless_loop_is_a_timeout(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace, code_mode_config=code_mode(timeout_ms=200))
    error = _failed(await h.exec("text('spinning'); while (true) {}"), "timeout")
    assert "budget" in error or "timeout" in error


@pytest.mark.anyio
async def test_running_out_of_memory_is_memory_limit_exceeded(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine, sessions, workspace, code_mode_config=code_mode(memory_limit_bytes=1 << 20)
    )
    error = _failed(
        await h.exec("const a = []; for (;;) a.push('x'.repeat(4096) + a.length)"),
        "memory_limit_exceeded",
    )
    assert "out of memory" in error


@pytest.mark.anyio
async def test_too_much_output_is_output_limit_exceeded(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine, sessions, workspace, code_mode_config=code_mode(max_output_bytes=1024)
    )
    _failed(
        await h.exec("for (let i = 0; i < 100; i++) text('line ' + i)"), "output_limit_exceeded"
    )


@pytest.mark.anyio
async def test_an_oversized_suspension_is_snapshot_limit_exceeded(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(
        engine, sessions, workspace, max_snapshot_bytes=1024, timeout_ms=200
    )
    error = _failed(await h.exec("return await tools.slow({})"), "snapshot_limit_exceeded")
    assert "1024" in error


@pytest.mark.anyio
async def test_wait_after_the_ttl_is_snapshot_expired(
    sessions: SessionManager, workspace: Path
) -> None:
    now = [1000.0]
    engine = CodeModeEngine(RunStore(clock=lambda: now[0]))
    gate = Gate()
    async with engine.running():
        h = await harness_with(
            engine, sessions, workspace, gate.tool, snapshot_ttl_seconds=1, timeout_ms=200
        )
        waiting = await h.exec("return await tools.slow({})")
        now[0] += 1.5
        error = _failed(await h.wait(waiting["runId"]), "snapshot_expired")
        assert "start over with exec" in error


@pytest.mark.anyio
async def test_going_over_the_pending_call_cap_is_too_many_pending_tool_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(
        engine, sessions, workspace, max_pending_tool_calls=2, max_queued_tool_calls=0
    )
    error = _failed(
        await h.exec("return await Promise.all([1, 2, 3].map(i => tools.slow({ tag: 't' + i })))"),
        "too_many_pending_tool_calls",
    )
    assert "at most 2" in error and "none of the new calls were started" in error
    assert gate.started == []


@pytest.mark.anyio
async def test_an_uncaught_failed_nested_call_is_nested_tool_failed(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _failed(
        await h.exec("return await tools.read({ path: 'missing.txt' })"), "nested_tool_failed"
    )
    assert error.startswith("Error: ")
    multi_line = _failed(await h.exec("return await tools.read({})"), "nested_tool_failed")
    assert "Invalid arguments for read" in multi_line


@pytest.mark.anyio
async def test_wait_on_an_aborted_run_is_aborted(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace, timeout_ms=300)
    waiting = await _park(h)
    run_id = waiting["runId"]
    async with anyio.create_task_group() as turn:  # the turn running this wait is cancelled
        turn.start_soon(h.wait, run_id)
        await wait_until(lambda: _resuming(engine, run_id), "the wait to be in progress")
        turn.cancel_scope.cancel()
    await wait_until(lambda: gate.cancelled == 1, "the nested call to be cancelled")
    assert len(engine.store) == 0
    error = _failed(await h.wait(waiting["runId"]), "aborted")
    assert "aborted" in error and "start over with exec" in error


@pytest.mark.anyio
async def test_a_guest_that_overflows_the_vm_stack_is_stack_overflow_and_the_engine_carries_on(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    # The guest's own JSON.stringify of a 200k-deep array kills its VM: the guest's fault.
    h = await _harness(engine, sessions, workspace)
    deep = "let a = []; for (let i = 0; i < 200000; i++) a = [a]; return JSON.stringify(a).length"
    error = _failed(await h.exec(deep), "stack_overflow")
    assert "nests too deeply" in error
    assert await h.value("return 'alive'") == "alive"


@pytest.mark.anyio
async def test_a_snapshot_that_cannot_be_restored_is_internal_error(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    waiting = await h.exec("await yield_control(); return 1")
    parked = engine.store.get(waiting["runId"])
    assert parked is not None
    parked.snapshot = parked.snapshot[: len(parked.snapshot) // 2]
    error = _failed(await h.wait(waiting["runId"]), "internal_error")
    assert error.startswith("could not restore the code-mode run")
    assert len(engine.store) == 0


def test_a_runtime_that_disappears_after_activation_is_runtime_unavailable(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        """
        import json, anyio
        from pathlib import Path
        from nodmix.catalog import RunCatalog
        from nodmix.codemode import (
            CodeModeEngine, RunScope, RunServices, boot_data, resolve_settings)
        from nodmix.hooks import Hooks
        from nodmix.tools import core_tools
        from nodmix.tools.executor import ToolExecutor

        async def main():
            catalog = RunCatalog.build(core_tools())
            scope = RunScope(agent_id="main", session_key="k", session_id="s", run_id="r")
            services = RunServices(scope=scope, catalog=catalog, executor=ToolExecutor(Hooks()),
                                   workspace=Path("."), emit=lambda e: None)
            engine = CodeModeEngine()
            async with engine.running():
                result = await engine.exec(services, resolve_settings(True), boot_data(catalog),
                                           {"code": "return 1"}, "call_1")
            print(json.dumps(result))

        anyio.run(main)
        """
    )
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    env = {**os.environ, "NODMIX_CACHE_DIR": str(empty)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    error = _failed(result, "runtime_unavailable")
    assert "nodmix sandbox install" in error


async def _park(h: Harness) -> dict[str, Any]:
    waiting = await h.exec("return (await tools.slow({})).text")
    assert waiting["status"] == "waiting", waiting
    return waiting


def _resuming(engine: CodeModeEngine, run_id: str) -> bool:
    parked = engine.store.get(run_id)
    return parked is not None and parked.resuming
