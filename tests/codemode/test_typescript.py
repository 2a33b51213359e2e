"""TypeScript cells: transformed (no type checking) and evaluated, diagnostics as failed
results, and the transform loaded lazily, never for JavaScript cells or disabled code mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.hooks import ToolCallInfo
from nodmix.sessions import SessionManager

from .support import build_harness, code_mode, recording_hook, text_tool


@pytest.mark.anyio
async def test_a_typescript_cell_is_transformed_and_runs_against_the_catalog(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup", "hit")])
    value = await h.value(
        """
        interface Hit { id: string; name: string }
        enum Mode { Fast = 'fast', Slow = 'slow' }
        type Pair<T> = [T, T];
        function first<T>(items: T[]): T | undefined { return items[0]; }
        const hits = (await tools.search('read file')) as Hit[];
        const pair: Pair<number> = [1, 2];
        const res: { text: string } = await tools.lookup({ q: 'x' });
        let late!: string;
        late = res.text;
        return { top: first(hits)?.id, mode: Mode.Slow, sum: pair[0] + pair[1], late };
        """,
        language="typescript",
    )
    assert value == {"top": "nodmix:core:read", "mode": "slow", "sum": 3, "late": "hit"}


@pytest.mark.anyio
async def test_typescript_is_not_type_checked(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace)
    value = await h.value("const n: number = 'text' as any; return n", language="typescript")
    assert value == "text"


@pytest.mark.anyio
async def test_typescript_diagnostics_come_back_as_failed_results(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace)
    result = await h.exec("const x: = 5;\nreturn x", language="typescript")
    assert result["status"] == "failed" and result["code"] == "typescript_transform_failed"
    assert result["error"].startswith("TypeScript: ") and len(result["error"]) < 2100
    runtime_error = await h.exec("const o: any = null; return o.x", language="typescript")
    assert runtime_error["status"] == "failed" and runtime_error["error"].startswith("TypeError")


@pytest.mark.anyio
async def test_typescript_module_syntax_is_refused_before_the_transform(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace)
    result = await h.exec("import type { A } from './a';\nreturn 1", language="typescript")
    assert result["code"] == "module_access_denied"


@pytest.mark.anyio
async def test_typescript_only_configuration_refuses_javascript_cells(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine, sessions, workspace, code_mode_config=code_mode(languages=["typescript"])
    )
    assert await h.value("const a: number = 1; return a", language="typescript") == 1
    result = await h.exec("return 1")  # language defaults to javascript
    assert result["code"] == "invalid_input" and "disabled" in result["error"]
    # The schema keeps both (a flat enum): the refusal comes from exec, as a result.
    language = h.exec_tool.spec.parameters["properties"]["language"]
    assert language["enum"] == ["javascript", "typescript"]
    assert 'Only language "typescript" is enabled.' in h.exec_tool.spec.description


@pytest.mark.anyio
async def test_hooks_learn_the_cell_language_of_outer_exec_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    seen: list[ToolCallInfo] = []
    h = await build_harness(
        engine, sessions, workspace, before_hooks=[("audit", recording_hook(seen))]
    )
    await h.exec("return 1")
    await h.exec("const a: number = 1; return a", language="typescript")
    kinds = [(i.tool_name, i.tool_kind, i.tool_input_kind) for i in seen]
    assert kinds == [
        ("exec", "code_mode_exec", "javascript"),
        ("exec", "code_mode_exec", "typescript"),
    ]


def test_the_transform_loads_only_for_typescript_cells(tmp_path: Path) -> None:
    """Run in a fresh process: other tests in this one may have loaded the transform."""
    script = textwrap.dedent(
        """
        import json, anyio
        from pathlib import Path
        from nodmix.catalog import RunCatalog
        from nodmix.codemode import (
            CodeModeEngine, RunScope, RunServices, boot_data, resolve_settings)
        from nodmix.hooks import Hooks
        from nodmix.sandbox import typescript_loaded
        from nodmix.tools import core_tools
        from nodmix.tools.executor import ToolExecutor
        import sys

        async def main():
            seen = {"import": typescript_loaded()}
            catalog = RunCatalog.build(core_tools())
            scope = RunScope(agent_id="main", session_key="k", session_id="s", run_id="r")
            services = RunServices(scope=scope, catalog=catalog, executor=ToolExecutor(Hooks()),
                                   workspace=Path("."), emit=lambda e: None)
            engine = CodeModeEngine()
            settings = resolve_settings(True)
            async with engine.running():
                js = await engine.exec(services, settings, boot_data(catalog),
                                       {"code": "return ALL_TOOLS.length"}, "c1")
                seen["js"] = [js["status"], typescript_loaded()]
                ts = await engine.exec(services, settings, boot_data(catalog),
                                       {"code": "const n: number = 2; return n",
                                        "language": "typescript"}, "c2")
                seen["ts"] = [ts["status"], typescript_loaded()]
            print(json.dumps(seen))

        anyio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen == {
        "import": False,
        "js": ["completed", False],
        "ts": ["completed", True],
    }


def test_disabled_code_mode_never_loads_the_transform_or_the_engine(
    isolated_state: Path, tmp_path: Path
) -> None:
    """A whole plain agent turn (code mode off) in a fresh process."""
    script = textwrap.dedent(
        """
        import json, sys, anyio
        from nodmix.config import load_config
        from nodmix.providers.fake import ModelReply
        from nodmix.runtime import Runtime
        from nodmix.testing.model_server import ScriptedModelServer

        async def main():
            async with ScriptedModelServer(lambda r: ModelReply.text("plain")) as server:
                cfg = sys.argv[1]
                with open(cfg, "w") as fh:
                    json.dump({
                        "models": {"providers": {"local": {"api": "openai-completions",
                            "baseUrl": server.base_url, "apiKey": "x", "models": [{"id": "m"}]}}},
                        "agents": {"defaults": {"model": {"primary": "local/m"}}},
                        "tools": {"codeMode": False},
                    }, fh)
                async with Runtime.open(load_config(__import__("pathlib").Path(cfg))) as rt:
                    out = await rt.run_turn("hi")
            from nodmix.sandbox import typescript_loaded
            print(json.dumps({"reply": out.result.reply, "ts": typescript_loaded(),
                              "engine": "nodmix.codemode.engine" in sys.modules}))

        anyio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(isolated_state / "nodmix.json")],
        capture_output=True,
        text=True,
        env={**os.environ, "NODMIX_STATE_DIR": str(isolated_state)},
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"reply": "plain", "ts": False, "engine": False}
