"""`nodmix mcp list|show|add|remove|probe|tools`: manage and check `mcp.servers`."""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import common_parent, print_json
from nodmix.invocation import nodmix_command

if TYPE_CHECKING:
    from nodmix.config.schema import MCPServerConfig
    from nodmix.mcp import MCPServerInfo

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_SECRET_KEY_RE = re.compile(r"auth|token|key|secret|password|passwd|cookie|credential", re.I)
_ENV_REF_RE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `mcp` command group."""
    parser = sub.add_parser("mcp", help="manage and check MCP servers (mcp.servers)")
    cmds = parser.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    parent = common_parent()

    p = cmds.add_parser("list", parents=[parent], help="list the configured servers")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)

    p = cmds.add_parser("show", parents=[parent], help="show one server's configuration")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_show)

    p = cmds.add_parser(
        "add",
        parents=[parent],
        help="add a server (probed before it is saved)",
        description="Add a stdio server (--command, one --arg per argument; write arguments "
        "that start with '-' as --arg=-m) or a remote one (--url).",
    )
    p.add_argument("name", help="server name: a letter, then letters, digits, '_' or '-'")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--command", help="executable of a stdio server")
    target.add_argument("--url", help="URL of a remote server")
    p.add_argument("--arg", action="append", default=[], metavar="ARG", help="command argument")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="server env var")
    p.add_argument("--cwd", help="working directory of a stdio server")
    p.add_argument("--header", action="append", default=[], metavar="K=V", help="HTTP header")
    p.add_argument("--transport", choices=["streamable-http", "sse"], help="remote transport")
    p.add_argument("--timeout-ms", type=int, help="start-up and per-request timeout")
    p.add_argument("--disabled", action="store_true", help="add it switched off (not probed)")
    p.add_argument("--no-probe", action="store_true", help="save without starting the server")
    p.add_argument("--replace", action="store_true", help="overwrite a server of the same name")
    p.set_defaults(handler=_add)

    p = cmds.add_parser("remove", parents=[parent], help="remove a server")
    p.add_argument("name")
    p.set_defaults(handler=_remove)

    p = cmds.add_parser("probe", parents=[parent], help="start servers and list their tools")
    p.add_argument("name", nargs="?", help="one server (default: every enabled server)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_probe)

    p = cmds.add_parser("tools", parents=[parent], help="list a server's tools")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_tools)


# ---- config access --------------------------------------------------------------------------


def _servers() -> tuple[Path, dict[str, Any], dict[str, MCPServerConfig]]:
    from nodmix.config.loader import load_config

    loaded = load_config()
    return loaded.path, loaded.raw, dict(loaded.config.mcp.servers)


def _one(name: str) -> MCPServerConfig:
    from nodmix.errors import ConfigError

    _, _, servers = _servers()
    if name not in servers:
        known = ", ".join(servers) or "none configured"
        raise ConfigError(f"no MCP server named {name!r} (configured: {known})")
    return servers[name]


def _masked(values: dict[str, str]) -> dict[str, str]:
    return {
        k: v if _ENV_REF_RE.match(v) or not _SECRET_KEY_RE.search(k) else "********"
        for k, v in values.items()
    }


def _describe(name: str, config: MCPServerConfig) -> dict[str, Any]:
    import msgspec

    from nodmix.mcp.targets import describe_target, transport_kind

    data: dict[str, Any] = msgspec.to_builtins(config)
    for key in ("env", "headers"):
        if key in data:
            data[key] = _masked(data[key])
    return {
        "name": name,
        "transport": transport_kind(config),
        "enabled": config.enabled,
        "target": describe_target(config),
        "config": data,
    }


# ---- list / show / add / remove -------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    _, _, servers = _servers()
    rows = [_describe(name, config) for name, config in servers.items()]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no MCP servers configured (add one with `{nodmix_command()} mcp add`)")
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "enabled" if r["enabled"] else "disabled"
        print(f"{r['name']:<{width}}  {r['transport']:<15}  {state:<8}  {r['target']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    info = _describe(args.name, _one(args.name))
    if args.json:
        print_json(info)
        return 0
    print(f"{info['name']} ({info['transport']}, {'enabled' if info['enabled'] else 'disabled'})")
    for key, value in info["config"].items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        print(f"  {key}: {text}")
    return 0


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    from nodmix.errors import ConfigError

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    """The `mcp.servers.<name>` object the flags describe, with one-line errors for misuse."""
    from nodmix.errors import ConfigError

    if args.command is not None:
        remote = (("--header", args.header), ("--transport", args.transport))
        misplaced = [flag for flag, value in remote if value]
        if misplaced:
            raise ConfigError(f"{', '.join(misplaced)} only apply to remote servers (--url)")
        command = args.command
        if os.sep in command and not os.path.isabs(command) and not args.cwd:
            # Saved absolute: the gateway may run from another directory than this shell.
            command = os.path.abspath(command)
        entry: dict[str, Any] = {"command": command}
        if args.arg:
            entry["args"] = list(args.arg)
        if args.env:
            entry["env"] = _pairs(args.env, "--env")
        if args.cwd:
            entry["cwd"] = args.cwd
    else:
        local = (("--arg", args.arg), ("--env", args.env), ("--cwd", args.cwd))
        misplaced = [flag for flag, value in local if value]
        if misplaced:
            raise ConfigError(f"{', '.join(misplaced)} only apply to stdio servers (--command)")
        if not re.match(r"^https?://", args.url):
            raise ConfigError(f"--url must be an http:// or https:// URL, got {args.url!r}")
        entry = {"url": args.url}
        if args.header:
            entry["headers"] = _pairs(args.header, "--header")
        if args.transport:
            entry["transport"] = args.transport
    if args.timeout_ms is not None:
        if args.timeout_ms <= 0:
            raise ConfigError("--timeout-ms must be a positive number of milliseconds")
        entry["timeoutMs"] = args.timeout_ms
    if args.disabled:
        entry["enabled"] = False
    return entry


def _add(args: argparse.Namespace) -> int:
    from nodmix.config.edit import write_document
    from nodmix.config.loader import validate
    from nodmix.errors import ConfigError, MCPError

    if not _NAME_RE.fullmatch(args.name):
        raise ConfigError(
            f"invalid server name {args.name!r}: use a letter, then letters, digits, '_' or '-'"
        )
    path, raw, servers = _servers()
    if args.name in servers and not args.replace:
        raise ConfigError(f"MCP server {args.name!r} already exists (use --replace)")
    doc: dict[str, Any] = json.loads(json.dumps(raw))
    section = doc.setdefault("mcp", {})
    if not isinstance(section, dict):
        raise ConfigError("mcp must be an object", file=str(path), key="mcp")
    section.setdefault("servers", {})[args.name] = _entry(args)
    config = validate(doc, file=str(path)).mcp.servers[args.name]
    note = "not probed"
    if not (args.no_probe or args.disabled):
        (result,) = _run_probes({args.name: config})
        if not result.ok:
            raise MCPError(
                f"probe failed, nothing saved: {result.error} (use --no-probe to save anyway)"
            )
        note = f"{result.tool_count} tools, probed in {result.seconds:.2f} s"
    write_document(path, doc)
    print(f"added MCP server {args.name!r} to {path} ({note})")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from nodmix.config.edit import write_document

    _one(args.name)
    path, raw, _ = _servers()
    doc: dict[str, Any] = json.loads(json.dumps(raw))
    del doc["mcp"]["servers"][args.name]
    write_document(path, doc)
    print(f"removed MCP server {args.name!r} from {path}")
    return 0


# ---- probe / tools --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Probe:
    name: str
    ok: bool
    seconds: float
    tool_count: int = 0
    error: str | None = None
    info: MCPServerInfo | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ok": self.ok, "seconds": round(self.seconds, 3)}
        if self.ok:
            out["tools"] = self.tool_count
        else:
            out["error"] = self.error
        if self.info is not None:
            out["server"] = {
                "name": self.info.server_name,
                "version": self.info.server_version,
                "protocolVersion": self.info.protocol_version,
            }
        return out


def _quiet_sdk_logs() -> None:
    import logging

    # Failures are printed as one line each; the SDK's tracebacks are for --verbose only.
    for name in ("mcp", "httpx2"):
        logger = logging.getLogger(name)
        if not logger.handlers and not logging.getLogger().handlers:
            logger.addHandler(logging.NullHandler())


def _run_probes(servers: dict[str, MCPServerConfig]) -> list[_Probe]:
    import anyio

    from nodmix.errors import MCPError
    from nodmix.mcp import MCPManager

    _quiet_sdk_logs()
    results: dict[str, _Probe] = {}

    async def run() -> None:
        async with MCPManager(servers, retry_backoff=0.0) as manager:

            async def one(name: str) -> None:
                start = time.perf_counter()
                try:
                    tools = await manager.server_tools(name)
                    info = await manager.server_info(name)
                except MCPError as exc:
                    took = time.perf_counter() - start
                    results[name] = _Probe(name=name, ok=False, seconds=took, error=str(exc))
                    return
                took = time.perf_counter() - start
                results[name] = _Probe(
                    name=name, ok=True, seconds=took, tool_count=len(tools), info=info
                )

            async with anyio.create_task_group() as tg:
                for name in servers:
                    tg.start_soon(one, name)

    anyio.run(run)
    return [results[name] for name in servers]


def _probe(args: argparse.Namespace) -> int:
    if args.name:
        targets = {args.name: _one(args.name)}
    else:
        _, _, servers = _servers()
        targets = {name: config for name, config in servers.items() if config.enabled}
    results = _run_probes(targets) if targets else []
    if args.json:
        print_json([r.as_json() for r in results])
    elif not results:
        print("no enabled MCP servers to probe")
    else:
        width = max(len(r.name) for r in results)
        for r in results:
            if r.ok:
                about = ""
                if r.info is not None and r.info.server_name:
                    about = f"  {r.info.server_name} {r.info.server_version or ''}".rstrip()
                detail = f"{r.tool_count} tools{about}"
                print(f"{r.name:<{width}}  ok      {r.seconds:6.2f} s  {detail}")
            else:
                print(f"{r.name:<{width}}  FAILED  {r.seconds:6.2f} s  {r.error}")
    return 0 if all(r.ok for r in results) else 1


def _tools(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.mcp import MCPManager, MCPTool

    config = _one(args.name)
    _quiet_sdk_logs()

    async def run() -> tuple[list[MCPTool], list[bool]]:
        async with MCPManager({args.name: config}, retry_backoff=0.0) as manager:
            tools = await manager.server_tools(args.name, include_filtered=True)
            return tools, [manager.allows(args.name, t.origin.name) for t in tools]

    tools, allowed = anyio.run(run)
    if args.json:
        print_json(
            [
                {
                    "name": t.spec.name,
                    "tool": t.origin.name,
                    "title": t.definition.title,
                    "description": t.definition.description,
                    "enabled": ok,
                    "inputSchema": t.definition.input_schema,
                }
                for t, ok in zip(tools, allowed, strict=True)
            ]
        )
        return 0
    if not tools:
        print(f"MCP server {args.name!r} has no tools")
        return 0
    width = max(len(t.spec.name) for t in tools)
    for t, ok in zip(tools, allowed, strict=True):
        summary = (t.definition.description.splitlines() or [""])[0]
        mark = "" if ok else "  (excluded by config)"
        print(f"{t.spec.name:<{width}}  {summary}{mark}")
    return 0
