"""`nodmix status [--json]`: the gateway, agents and their models, and what Nodmix holds."""

from __future__ import annotations

import argparse
from typing import Any

from nodmix.cli.common import common_parent, positive_seconds, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `status` command."""
    p = sub.add_parser(
        "status",
        parents=[common_parent()],
        help="is the gateway up, do the models answer, sessions, MCP, last errors",
        description=(
            "Report the gateway (running or not, and where), the version, each agent's models "
            "and whether they answer (one tiny request each, bounded by --timeout), channels, "
            "MCP servers, the code-mode runtime, session counts and the last logged errors."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--url", help="the gateway's URL (default: the running one, else the port)")
    p.add_argument("--no-probe", action="store_true", help="do not send the models a test request")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        help="seconds each model probe may take (10)",
    )
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from nodmix.cli.status_report import gather
    from nodmix.config import paths
    from nodmix.config.loader import load_config

    loaded = load_config()
    report = gather(
        paths.state_dir(), loaded, url=args.url, probe=not args.no_probe, timeout=args.timeout
    )
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return 0


def render(report: dict[str, Any]) -> str:
    """The report as the terminal shows it."""
    gateway = report["gateway"]
    if gateway["running"]:
        where = f"running at {gateway['url']} (version {gateway.get('version')}"
        where += f", up {gateway.get('uptimeSeconds', 0):.0f}s, auth {gateway.get('auth')})"
        if gateway.get("state"):  # it refuses to write its state
            where += f"\n           refusing writes: {gateway['state']}"
    else:
        where = f"not running ({gateway['url']}: {gateway.get('detail', 'no answer')})"
    config = report["config"]
    lines = [
        f"nodmix {report['version']}",
        f"gateway:   {where}",
        f"config:    {config['path']}" + ("" if config["exists"] else " (not created)"),
        f"state:     {report['stateDir']}",
        "agents:",
    ]
    for agent in report["agents"]:
        mode = ", code mode" if agent["codeMode"] else ""
        lines.append(f"  {agent['id']} ({agent['name']}{mode})")
        probes = {p["model"]: p for p in agent.get("probes", [])}
        for ref in agent["models"]:
            probe = probes.get(ref)
            if probe is None:
                lines.append(f"    {ref}: not probed")
            elif probe["answers"]:
                lines.append(f"    {ref}: answers ({probe['latencyMs']:.0f} ms)")
            else:
                lines.append(f"    {ref}: NOT answering: {probe['detail']}")
    channels = report["channels"]
    lines.append(
        "channels:  "
        + (", ".join(f"{c['name']}{'' if c['enabled'] else ' (off)'}" for c in channels) or "none")
    )
    servers = report["mcpServers"]
    lines.append(
        "mcp:       "
        + (
            ", ".join(
                f"{s['name']} ({s['transport']}{'' if s['enabled'] else ', off'})" for s in servers
            )
            or "none"
        )
    )
    code = report["codeMode"]
    state = "installed" if code["installed"] else "not installed"
    users = ", ".join(code["enabledFor"]) or "no agent"
    lines.append(f"code mode: {code['runtime']} {code['version']} {state}; on for {users}")
    sessions = report["sessions"]
    backend = report.get("state") or {}
    counted = ", ".join(f"{k}: {v}" for k, v in sessions.items())
    lines.append("sessions:  " + (counted or ("unknown" if backend.get("error") else "none")))
    from nodmix.cli.state import render as render_state

    if backend.get("error"):
        lines.append(f"state:     {backend.get('backend')}: {backend['error']}")
    elif backend.get("backend") == "postgres":
        lines.extend(render_state(backend))
    errors = report["lastErrors"]
    lines.append("last errors:" + ("" if errors else " none"))
    lines.extend(f"  {e.get('ts')} {e.get('logger')}: {e.get('msg')}" for e in errors)
    return "\n".join(lines)
