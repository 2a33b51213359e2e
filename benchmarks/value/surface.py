"""Tool-surface size: what the model is sent about tools, direct mode vs code mode.

For each catalog size the direct-mode tool definitions are the catalog's specs; the code-mode
ones are the real `exec`/`wait` built by `nodmix.codemode.surface.build_code_mode_tools` for that
catalog (with its MCP servers). Both are rendered by the OpenAI adapter's `build_payload`, so
bytes are exactly what goes over the wire (compact JSON, as the transport encodes it). Tokens are
Nodmix's estimate, characters / 4 (`nodmix.context.tokens`).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.value.catalog import SIZES, catalog_tools
from nodmix.codemode.engine import CodeModeEngine
from nodmix.codemode.runs import RunScope
from nodmix.codemode.settings import resolve_settings
from nodmix.codemode.surface import build_code_mode_tools
from nodmix.context.tokens import chars_to_tokens, estimate_tool_tokens
from nodmix.hooks import Hooks
from nodmix.loop.prompt import build_system_prompt
from nodmix.messages import user_message
from nodmix.providers.base import ModelRequest, ModelSpec
from nodmix.providers.openai.mapping import build_payload
from nodmix.tools import Tool
from nodmix.tools.base import ToolSpec
from nodmix.tools.executor import ToolExecutor

WORKSPACE = Path("~/.nodmix/workspace")
NOW = datetime.datetime(2026, 3, 2, 9, 30, tzinfo=datetime.UTC)
PROMPT = "Which of my open deals close this month, and who owns them?"
TARGET_RATIO_AT_500 = 0.02
TARGET_MAX_TOKENS = 1500
_encode = msgspec.json.Encoder().encode


async def code_mode_specs(tools: Sequence[Tool]) -> list[ToolSpec]:
    """The `exec` and `wait` specs code mode builds for a run with `tools`."""
    pair = await build_code_mode_tools(
        effective=tools,
        settings=resolve_settings(True),
        scope=RunScope(agent_id="main", session_key="agent:main:main", session_id="s", run_id="r"),
        engine=CodeModeEngine(),
        executor=ToolExecutor(Hooks()),
        workspace=WORKSPACE,
        emit=lambda event: None,
        append=lambda *args, **kwargs: None,
    )
    return [tool.spec for tool in pair]


def payload(specs: Sequence[ToolSpec], *, code_mode: bool) -> dict[str, Any]:
    """The first chat-completions request of a turn, as the OpenAI adapter builds it."""
    system = build_system_prompt(
        agent_name="Nodmix", workspace=WORKSPACE, tools=specs, now=NOW, code_mode=code_mode
    )
    request = ModelRequest(
        model=ModelSpec(provider="local", id="model"),
        system=system,
        messages=(user_message(PROMPT),),
        tools=tuple(specs),
    )
    return build_payload(request, base_url="http://127.0.0.1:8000/v1")


def measure(specs: Sequence[ToolSpec], *, code_mode: bool) -> dict[str, int]:
    """Bytes and estimated tokens of the tool definitions and of the whole first request."""
    body = payload(specs, code_mode=code_mode)
    tools_bytes = len(_encode(body["tools"]))
    request_text = _encode(body).decode()
    return {
        "tools": len(specs),
        "tools_bytes": tools_bytes,
        "tools_tokens": chars_to_tokens(len(_encode(body["tools"]).decode())),
        "tools_tokens_estimate": estimate_tool_tokens(specs),
        "request_bytes": len(request_text.encode()),
        "request_tokens": chars_to_tokens(len(request_text)),
    }


async def run() -> dict[str, Any]:
    """Both modes for every catalog size."""
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        tools = catalog_tools(size)
        direct = measure([t.spec for t in tools], code_mode=False)
        specs = await code_mode_specs(tools)
        code = measure(specs, code_mode=True)
        exec_spec = next(s for s in specs if s.name == "exec")
        rows.append(
            {
                "catalog": size,
                "direct": direct,
                "code_mode": code,
                "exec_description_chars": len(exec_spec.description),
                "exec_description_tokens": chars_to_tokens(len(exec_spec.description)),
                "tools_ratio": code["tools_tokens"] / direct["tools_tokens"],
                "request_vs_direct_tools": code["request_tokens"] / direct["tools_tokens"],
            }
        )
    at_500 = next(r for r in rows if r["catalog"] == 500)
    targets = {
        "code_request_le_2pct_of_direct_tools_at_500": at_500["request_vs_direct_tools"]
        <= TARGET_RATIO_AT_500,
        "code_request_le_1500_tokens_all_sizes": all(
            r["code_mode"]["request_tokens"] <= TARGET_MAX_TOKENS for r in rows
        ),
    }
    return {"rows": rows, "targets": targets}


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows."""
    out = [
        "| catalog tools | direct: tool definitions | code mode: tool definitions (exec + wait) "
        "| of which exec description | code / direct (tools) | direct: 1st request "
        "| code mode: 1st request | code-mode request / direct tools |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        d, c = r["direct"], r["code_mode"]
        out.append(
            f"| {r['catalog']} | {d['tools_bytes']:,} B / {d['tools_tokens']:,} tok "
            f"| {c['tools_bytes']:,} B / {c['tools_tokens']:,} tok "
            f"| {r['exec_description_tokens']:,} tok | {r['tools_ratio']:.2%} "
            f"| {d['request_tokens']:,} tok | {c['request_tokens']:,} tok "
            f"| {r['request_vs_direct_tools']:.2%} |"
        )
    return out
