"""`nodmix sessions list|show|tail|export-trajectory|compact` (the commands that change
things, `repair|repair-store|rename|delete`, are in `sessions_admin.py`; `checkpoints|restore`
in `sessions_checkpoints.py`).

Every action names its session the same way, `KEY_OR_ID`: a key, a bare name of the default
agent, or a session id (a unique prefix will do), which also reaches sessions replaced by
`/new`, archived or deleted. Reading commands open transcripts read-only (a gateway may be
appending): nothing is created, and a torn last line is ignored, not repaired.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import common_parent, count, print_json, print_table
from nodmix.cli.session_target import add_target, manager, target_of
from nodmix.invocation import nodmix_command

if TYPE_CHECKING:
    from nodmix.sessions.locate import Located
    from nodmix.sessions.render import EntryRenderer
    from nodmix.sessions.session import SessionSummary
    from nodmix.sessions.transcript import Transcript

FOLLOW_POLL_S = 0.25


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `sessions` command group."""
    from nodmix.cli import sessions_admin, sessions_checkpoints

    parser = sub.add_parser("sessions", help="list, inspect, repair and export sessions")
    # `dest` names the action so later groups (the lead's `sessions compact`) can slot in.
    cmds = parser.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    parent = common_parent()

    p = cmds.add_parser("list", parents=[parent], help="list sessions")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--agent", metavar="ID", help="agent whose sessions to list (default main)")
    which.add_argument("--all-agents", action="store_true", help="list sessions of every agent")
    p.add_argument(
        "--all",
        action="store_true",
        help="also list sessions replaced by /new, archived or deleted (marked in STATUS)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)

    p = cmds.add_parser("show", parents=[parent], help="print a session's transcript")
    add_target(p)
    p.add_argument("--json", action="store_true", help="print the raw entries as JSON")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(handler=_show)

    p = cmds.add_parser("tail", parents=[parent], help="print the latest transcript entries")
    add_target(p, optional=True)
    p.add_argument("-n", type=count, default=20, metavar="N", help="entries to print (default 20)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(handler=_tail)

    p = cmds.add_parser(
        "export-trajectory", parents=[parent], help="export a session as trajectory JSON"
    )
    add_target(p)
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(handler=_export)

    p = cmds.add_parser(
        "compact",
        parents=[parent],
        help="summarise a session's older history now (the full history stays on disk)",
    )
    p.add_argument("key", help="session key, or a session name of the default agent")
    p.add_argument("--instructions", metavar="TEXT", help="what the summary should focus on")
    p.add_argument("--agent", metavar="ID", help="agent (default: from the key, else main)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(handler=_compact)

    sessions_admin.register(cmds, parent)
    sessions_checkpoints.register(cmds, parent, add_target)


def _load(args: argparse.Namespace) -> tuple[Located, Transcript]:
    from nodmix.sessions.locate import locate

    sessions = manager()
    found = locate(sessions, target_of(args))
    return found, sessions.backend.read(found.agent_id, found.path)


def _summary_json(row: SessionSummary) -> dict[str, Any]:
    from nodmix.sessions.keys import session_kind
    from nodmix.sessions.store import store_to_builtins

    entry: dict[str, Any] = store_to_builtins({row.key: row.entry})[row.key]
    return {
        "key": row.key,
        "agentId": row.agent_id,
        "kind": session_kind(row.key),
        **entry,
        "messages": row.message_count,
    }


def _list(args: argparse.Namespace) -> int:
    if args.all:
        from nodmix.cli.sessions_admin import list_all

        return list_all(args)
    sessions = manager()
    agent = None if args.all_agents else (args.agent or sessions.default_agent_id)
    rows = sessions.list_sessions(agent)
    if args.json:
        print_json([_summary_json(r) for r in rows])
        return 0
    if not rows:
        where = "any agent" if agent is None else f"agent {agent}"
        print(f"no sessions for {where}")
        return 0
    titled = any(r.entry.label for r in rows)
    spawned = any(r.entry.spawned_by for r in rows)
    table = [("KEY", "SESSION ID", "UPDATED", "TOKENS", "MESSAGES", "PARENT", "TITLE")]
    for row in rows:
        updated = datetime.fromtimestamp(row.entry.updated_at / 1000).strftime("%Y-%m-%d %H:%M")
        table.append(
            (
                row.key,
                row.session_id,
                updated,
                str(row.entry.total_tokens),
                str(row.message_count),
                row.entry.spawned_by or "-",
                row.entry.label or "",
            )
        )
    columns = [i for i in range(7) if (i != 5 or spawned) and (i != 6 or titled)]
    print_table([[r[i] for i in columns] for r in table])
    return 0


def _show(args: argparse.Namespace) -> int:
    from nodmix.sessions.entries import entry_to_builtins
    from nodmix.sessions.render import EntryRenderer

    found, transcript = _load(args)
    if args.json:
        print_json(
            {
                "sessionKey": found.key,
                "sessionId": transcript.session_id,
                "status": found.status,
                **_lineage(found),
                "file": str(transcript.path),
                "header": entry_to_builtins(transcript.header),
                "skippedLines": [{"line": s.line, "reason": s.reason} for s in transcript.skipped],
                "entries": [entry_to_builtins(e) for e in transcript.entries],
            }
        )
        return 0
    header = transcript.header
    title = f"  title {found.entry.label}" if found.entry and found.entry.label else ""
    status = "" if found.status == "current" else f"  ({found.status})"
    print(f"session {found.key or '-'}  id {transcript.session_id}{status}{title}")
    # On the postgres backend the path only names the transcript: its lines are rows.
    stored = transcript.path if transcript.path.exists() else "in the state database"
    print(f"file    {stored}")
    print(f"cwd     {header.cwd}  created {header.timestamp}")
    place = _lineage(found)
    if place["parent"]:
        run = place["run"]
        about = f"  run {run['runId']} {run['status']} (depth {run['depth']})" if run else ""
        if run and run.get("error"):
            about += f": {run['error']}"
        print(f"subagent of {place['parent']}{about}")
    if header.parent_session:
        print(f"continues {header.parent_session}")
    for skipped in transcript.skipped:
        print(f"warning: line {skipped.line} skipped ({skipped.reason})")
    if transcript.skipped:
        repair = f"{nodmix_command()} sessions repair {transcript.session_id}"
        print(f"         run `{repair}` to rewrite the file")
    print()
    renderer = EntryRenderer(full=args.full)
    for entry in transcript.entries:
        for line in renderer.render(entry):
            print(line)
    return 0


def _lineage(found: Located) -> dict[str, Any]:
    """The session's kind, the session that spawned it and its subagent run."""
    from nodmix.config.paths import state_dir
    from nodmix.subagents.describe import SessionLineage

    return SessionLineage(state_dir()).describe(found.key, found.entry)


def _tail(args: argparse.Namespace) -> int:
    from nodmix.sessions.render import EntryRenderer

    found, transcript = _load(args)
    renderer = EntryRenderer(full=args.full)
    # Render from the start so nesting depths are known, print only the last N.
    rendered = [renderer.render(e) for e in transcript.entries]
    for lines in rendered[max(0, len(rendered) - max(0, args.n)) :]:
        print("\n".join(lines))
    if not args.follow:
        return 0
    sys.stdout.flush()
    try:
        _follow(found, transcript, renderer)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow ends: not an error
    return 0


def _follow(found: Located, transcript: Transcript, renderer: EntryRenderer) -> None:

    sessions = manager()
    while True:
        for entry in transcript.refresh():
            print("\n".join(renderer.render(entry)), flush=True)
        time.sleep(FOLLOW_POLL_S)
        if found.key is None or found.status != "current":
            continue
        current = sessions.store(found.agent_id).get(found.key)
        if current is not None and current.session_id != transcript.session_id:
            # The session was reset or continued in a successor transcript: follow that one.
            transcript = sessions.backend.read(
                found.agent_id, transcript.path.with_name(current.session_file)
            )
            print(f"-- now following {transcript.path.name}", flush=True)
            for new in transcript.entries:
                print("\n".join(renderer.render(new)), flush=True)


def _export(args: argparse.Namespace) -> int:
    from nodmix.sessions.export import build_trajectory

    found, transcript = _load(args)
    document = build_trajectory(transcript.header, transcript.entries)
    document["sessionKey"] = found.key
    document["agentId"] = found.agent_id
    if args.output:
        path = Path(args.output)
        text = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    else:
        print_json(document)
    return 0


def _compact(args: argparse.Namespace) -> int:
    import anyio

    return anyio.run(_compact_session, args)


async def _compact_session(args: argparse.Namespace) -> int:
    from nodmix.compaction.service import compaction_message
    from nodmix.runtime import Runtime

    async with Runtime.open() as runtime:
        done = await runtime.compact_session(args.agent, args.key, instructions=args.instructions)
    if args.json:
        print_json(done.to_json())
    else:
        print(f"{done.session_key}: {compaction_message(done)}")
    return 0 if done.result.ok else 1
