"""Multi-step workflows through the real agent loop, direct mode vs code mode.

One `Runtime` per (mode, catalog size), built from a config file that points at a
`ScriptedModelServer` over real HTTP with the OpenAI adapter, exactly what `nodmix gateway`
runs. The catalog's tools come in as an extra tool source (the runtime adds its core tools).
Every request body the server receives is recorded: round trips are the number of requests of a
turn, input size is the sum of their JSON bodies (bytes, and tokens as chars / 4) plus the
input tokens the scripted provider reports for them (chars / 4 of system prompt, messages and
tool definitions). The context window is set to 1M tokens so that neither pruning nor
compaction alters what direct mode sends.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.value import result_size
from benchmarks.value.backends import BODIES
from benchmarks.value.catalog import catalog_tools
from benchmarks.value.models import BenchmarkError, CodeModel, DirectModel
from benchmarks.value.workflows import WORKFLOWS, Workflow
from nodmix.config import load_config
from nodmix.context.tokens import chars_to_tokens
from nodmix.providers.fake import ModelReply, estimate_usage
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.wire import RecordedRequest
from nodmix.tools import Tool

CATALOG_SIZES = (50, 200)
CORE_TOOLS = 5
_encode = msgspec.json.Encoder().encode


class _Source:
    """A fixed tool list as a runtime tool source."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = list(tools)

    async def list_tools(self) -> Sequence[Tool]:
        return self._tools


def _config(state: Path, base_url: str, *, code_mode: bool) -> Path:
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "bench",
                    "models": [{"id": "scripted", "contextWindow": 1_000_000}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "tools": {"codeMode": {"enabled": code_mode}},
    }
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _sizes(requests: Sequence[RecordedRequest]) -> dict[str, int]:
    body_chars = [len(_encode(r.body).decode()) for r in requests]
    reported = [
        estimate_usage(r.request, ()).input if r.request is not None else 0 for r in requests
    ]
    return {
        "requests": len(requests),
        "input_bytes": sum(len(_encode(r.body)) for r in requests),
        "input_tokens": sum(chars_to_tokens(c) for c in body_chars),
        "reported_input_tokens": sum(reported),
    }


async def _turn(
    runtime: Runtime, server: ScriptedModelServer, workflow: Workflow, model: Any, key: str
) -> dict[str, Any]:
    server.respond = model
    before = len(server.requests)
    outcome = await runtime.run_turn(workflow.prompt, session_key=f"agent:main:{key}")
    if model.facts is None:
        raise BenchmarkError(f"{key}: the turn ended without an answer: {outcome.result.reply}")
    return {**_sizes(server.requests[before:]), "facts": model.facts}


async def run_mode(
    server: ScriptedModelServer,
    size: int,
    *,
    code_mode: bool,
    workflows: Sequence[Workflow] = WORKFLOWS,
) -> dict[str, dict[str, Any]]:
    """Workflows in one mode against a catalog of `size` tools."""
    needed = sorted({name for w in WORKFLOWS for name in w.tools})
    tools = catalog_tools(size, include=needed, bodies=BODIES)
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="nodmix-value-") as tmp:
        state = Path(tmp)
        path = _config(state, server.base_url, code_mode=code_mode)
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(path)}
        async with Runtime.open(
            load_config(path), env=env, extra_sources=[_Source(tools[CORE_TOOLS:])]
        ) as runtime:
            runtime.agent("main").workspace.mkdir(parents=True, exist_ok=True)
            for workflow in workflows:
                key = f"{workflow.name}-{'code' if code_mode else 'direct'}-{size}"
                if code_mode:
                    code_model = CodeModel(workflow)
                    row = await _turn(runtime, server, workflow, code_model, key)
                    # The model no longer reads telemetry; the transcript's details keep it.
                    sizes = result_size.measure(
                        result_size.session_results(runtime, f"agent:main:{key}")
                    )
                    telemetry = sizes.pop("last_telemetry")
                    row["tokens_avoided"] = telemetry["tokensAvoided"]
                    row["nested_calls"] = telemetry["callCount"]
                    row["search_misses"] = code_model.misses
                    row["result_size"] = sizes
                else:
                    direct_model = DirectModel(workflow)
                    row = await _turn(runtime, server, workflow, direct_model, key)
                    row["tool_calls"] = direct_model.tool_calls
                    row["result_tokens"] = chars_to_tokens(direct_model.result_chars)
                out[workflow.name] = row
    return out


async def return_one(server: ScriptedModelServer) -> dict[str, Any]:
    """What the model reads back from `exec` `return 1`, before and after."""
    calls = 0

    def model(request: Any) -> ModelReply:
        nonlocal calls
        calls += 1
        if calls == 1:
            return ModelReply.tool_call("exec", {"code": "return 1"}, id="call_r1")
        return ModelReply.text("1")

    server.respond = model
    with tempfile.TemporaryDirectory(prefix="nodmix-value-") as tmp:
        state = Path(tmp)
        path = _config(state, server.base_url, code_mode=True)
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(path)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            runtime.agent("main").workspace.mkdir(parents=True, exist_ok=True)
            await runtime.run_turn("one", session_key="agent:main:return-one")
            sizes = result_size.measure(
                result_size.session_results(runtime, "agent:main:return-one")
            )
    sizes.pop("last_telemetry")
    return sizes


async def run() -> dict[str, Any]:
    """Both modes at every catalog size; checks that both modes reach the same facts."""
    result: dict[str, Any] = {"sizes": {}}
    async with ScriptedModelServer(lambda request: ModelReply.text("idle")) as server:
        result["return_one"] = await return_one(server)
        for size in CATALOG_SIZES:
            direct = await run_mode(server, size, code_mode=False)
            code = await run_mode(server, size, code_mode=True)
            rows = []
            for workflow in WORKFLOWS:
                d, c = direct[workflow.name], code[workflow.name]
                if d["facts"] != c["facts"]:
                    raise BenchmarkError(
                        f"{workflow.name}: modes disagree:\n{d['facts']}\n{c['facts']}"
                    )
                rows.append(
                    {
                        "workflow": workflow.name,
                        "prompt": workflow.prompt,
                        "direct": {k: v for k, v in d.items() if k != "facts"},
                        "code_mode": {k: v for k, v in c.items() if k != "facts"},
                        "token_ratio": c["input_tokens"] / d["input_tokens"],
                        "round_trip_ratio": c["requests"] / d["requests"],
                    }
                )
            result["sizes"][str(size)] = {"rows": rows, "totals": _totals(rows)}
    return result


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def total(mode: str, key: str) -> int:
        return sum(int(r[mode][key]) for r in rows)

    d_tokens, c_tokens = total("direct", "input_tokens"), total("code_mode", "input_tokens")
    d_trips, c_trips = total("direct", "requests"), total("code_mode", "requests")
    return {
        "direct_input_tokens": d_tokens,
        "code_input_tokens": c_tokens,
        "direct_requests": d_trips,
        "code_requests": c_trips,
        "token_ratio": c_tokens / d_tokens,
        "round_trip_ratio": c_trips / d_trips,
        "tokens_avoided_reported": sum(r["code_mode"]["tokens_avoided"]["total"] for r in rows),
    }


def table(result: dict[str, Any]) -> list[str]:
    """Markdown: one table per catalog size."""
    out: list[str] = []
    for size, block in result["sizes"].items():
        out += [
            f"#### Workflows over a {size}-tool catalog",
            "",
            "| workflow | direct: round trips | direct: input tokens | code mode: round trips "
            "| code mode: input tokens | input ratio (code/direct) | round-trip ratio "
            "| tokensAvoided (telemetry) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in block["rows"]:
            d, c = r["direct"], r["code_mode"]
            out.append(
                f"| {r['workflow']} | {d['requests']} | {d['input_tokens']:,} | {c['requests']} "
                f"| {c['input_tokens']:,} | {r['token_ratio']:.2f} | {r['round_trip_ratio']:.2f} "
                f"| {c['tokens_avoided']['total']:,} |"
            )
        t = block["totals"]
        out.append(
            f"| **all six** | {t['direct_requests']} | {t['direct_input_tokens']:,} "
            f"| {t['code_requests']} | {t['code_input_tokens']:,} | {t['token_ratio']:.2f} "
            f"| {t['round_trip_ratio']:.2f} | {t['tokens_avoided_reported']:,} |"
        )
        out.append("")
    rows = [
        {"workflow": r["workflow"], "catalog": size, "result_size": r["code_mode"]["result_size"]}
        for size, block in result["sizes"].items()
        for r in block["rows"]
    ]
    out += [
        "#### What the model reads back per code-mode call (exec/wait results)",
        "",
        *result_size.table(rows, result["return_one"]),
        "",
    ]
    return out
