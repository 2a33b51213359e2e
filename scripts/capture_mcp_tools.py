"""Capture the tool definitions of the real MCP servers the project tests with.

    .venv/bin/python scripts/capture_mcp_tools.py [--output benchmarks/fixtures/mcp_tools.json]

Starts `mcp-server-time` (PyPI, `python -m mcp_server_time`) and `server-everything` (npm,
`node_modules/.bin/mcp-server-everything stdio`; `make node` installs it) through
`nodmix.mcp.MCPManager`, lists every tool each server reports and writes name, title,
description, input schema and annotations to a JSON fixture. The code-mode value benchmarks
read the fixture, so they run without Node or the servers; rerun this to refresh it after
upgrading either server.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "benchmarks" / "fixtures" / "mcp_tools.json"
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"


def server_configs() -> dict[str, MCPServerConfig]:
    """The servers to capture, as `mcp.servers` entries."""
    return {
        "time": MCPServerConfig(command=sys.executable, args=["-m", "mcp_server_time"]),
        "everything": MCPServerConfig(command=str(EVERYTHING), args=["stdio"]),
    }


async def capture() -> dict[str, Any]:
    """Every tool of every server, in the order the servers list them."""
    configs = server_configs()
    servers: dict[str, Any] = {}
    async with MCPManager(configs) as manager:
        for name in configs:
            info = await manager.server_info(name)
            tools = await manager.server_tools(name, include_filtered=True)
            servers[name] = {
                "serverInfo": {
                    "name": info.server_name,
                    "version": info.server_version,
                    "resources": info.resources,
                    "prompts": info.prompts,
                },
                "tools": [_definition(tool.definition) for tool in tools],
            }
    return {
        "comment": "Captured by scripts/capture_mcp_tools.py from the live servers; do not edit.",
        "servers": servers,
    }


def _definition(definition: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": definition.name}
    if definition.title:
        out["title"] = definition.title
    out["description"] = definition.description
    out["inputSchema"] = definition.input_schema
    if definition.annotations:
        out["annotations"] = definition.annotations
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if not EVERYTHING.exists():
        print(f"missing {EVERYTHING}: run `make node` first", file=sys.stderr)
        return 2
    data = anyio.run(capture)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    counts = ", ".join(f"{k}: {len(v['tools'])}" for k, v in data["servers"].items())
    print(f"wrote {args.output.relative_to(ROOT)} ({counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
