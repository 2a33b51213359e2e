"""`nodmix sessions list|show|tail|export-trajectory|repair-store`.

These commands only read transcripts (a gateway may be appending to them at the same time), so
they open sessions read-only: nothing is created, and a torn last line is ignored, not repaired.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import common_parent, print_json

if TYPE_CHECKING:
    from nodmix.sessions.manager import SessionManager
    from nodmix.sessions.render import EntryRenderer
    from nodmix.sessions.session import Session, SessionSummary

FOLLOW_POLL_S = 0.25


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `sessions` command group."""
    parser = sub.add_parser("sessions", help="list, inspect and export sessions")
    # `dest` names the action so later groups (the lead's `sessions compact`) can slot in.
    cmds = parser.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    parent = common_parent()

    p = cmds.add_parser("list", parents=[parent], help="list sessions")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--agent", metavar="ID", help="agent whose sessions to list (default main)")
    which.add_argument("--all-agents", action="store_true", help="list sessions of every agent")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)

    p = cmds.add_parser("show", parents=[parent], help="print a session's transcript")
    p.add_argument("key", help="session key, or a session name of the default agent")
    p.add_argument("--json", action="store_true", help="print the raw entries as JSON")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(handler=_show)

    p = cmds.add_parser("tail", parents=[parent], help="print the latest transcript entries")
    p.add_argument("--session-key", metavar="KEY", help="session (default agent:main:main)")
    p.add_argument("-n", type=int, default=20, metavar="N", help="entries to print (default 20)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(handler=_tail)

    p = cmds.add_parser(
        "export-trajectory", parents=[parent], help="export a session as trajectory JSON"
    )
    p.add_argument("--session-key", metavar="KEY", required=True)
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

    p = cmds.add_parser(
        "repair-store",
        parents=[parent],
        help="move a corrupt sessions.json aside so the agent can start again",
    )
    p.add_argument("--agent", metavar="ID", default=None, help="agent (default main)")
    p.set_defaults(handler=_repair_store)


def _manager(*, read_only: bool = True) -> SessionManager:
    from nodmix.config.paths import state_dir
    from nodmix.sessions.manager import SessionManager

    return SessionManager(state_dir(), read_only=read_only)


def _open(key: str | None) -> Session:
    return _manager().open(key or "", create=False)


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def _summary_json(row: SessionSummary) -> dict[str, Any]:
    from nodmix.sessions.store import store_to_builtins

    entry: dict[str, Any] = store_to_builtins({row.key: row.entry})[row.key]
    return {"key": row.key, "agentId": row.agent_id, **entry, "messages": row.message_count}


def _list(args: argparse.Namespace) -> int:
    manager = _manager()
    agent = None if args.all_agents else (args.agent or manager.default_agent_id)
    rows = manager.list_sessions(agent)
    if args.json:
        print_json([_summary_json(r) for r in rows])
        return 0
    if not rows:
        where = "any agent" if agent is None else f"agent {agent}"
        print(f"no sessions for {where}")
        return 0
    table = [("KEY", "SESSION ID", "UPDATED", "TOKENS", "MESSAGES")]
    for row in rows:
        updated = datetime.fromtimestamp(row.entry.updated_at / 1000).strftime("%Y-%m-%d %H:%M")
        table.append(
            (row.key, row.session_id, updated, str(row.entry.total_tokens), str(row.message_count))
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _show(args: argparse.Namespace) -> int:
    from nodmix.sessions.entries import entry_to_builtins
    from nodmix.sessions.render import EntryRenderer

    session = _open(args.key)
    transcript = session.transcript
    if args.json:
        print_json(
            {
                "sessionKey": session.key,
                "sessionId": session.session_id,
                "file": str(transcript.path),
                "header": entry_to_builtins(transcript.header),
                "entries": [entry_to_builtins(e) for e in transcript.entries],
            }
        )
        return 0
    header = transcript.header
    print(f"session {session.key}  id {session.session_id}")
    print(f"file    {transcript.path}")
    print(f"cwd     {header.cwd}  created {header.timestamp}")
    if header.parent_session:
        print(f"continues {header.parent_session}")
    print()
    renderer = EntryRenderer(full=args.full)
    for entry in transcript.entries:
        for line in renderer.render(entry):
            print(line)
    return 0


def _tail(args: argparse.Namespace) -> int:
    from nodmix.sessions.render import EntryRenderer

    manager = _manager()
    session = manager.open(args.session_key or "", create=False)
    renderer = EntryRenderer(full=args.full)
    entries = session.transcript.entries
    # Render from the start so nesting depths are known, print only the last N.
    rendered = [renderer.render(e) for e in entries]
    for lines in rendered[max(0, len(rendered) - max(0, args.n)) :]:
        print("\n".join(lines))
    if not args.follow:
        return 0
    sys.stdout.flush()
    try:
        _follow(manager, session, renderer)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow ends: not an error
    return 0


def _follow(manager: SessionManager, session: Session, renderer: EntryRenderer) -> None:
    while True:
        for entry in session.transcript.refresh():
            print("\n".join(renderer.render(entry)), flush=True)
        time.sleep(FOLLOW_POLL_S)
        current = manager.store(session.agent_id).get(session.key)
        if current is not None and current.session_id != session.session_id:
            # The session was reset or continued in a successor transcript: follow that one.
            session = manager.open(session.key, create=False)
            print(f"-- now following {session.transcript.path.name}", flush=True)
            for new in session.transcript.entries:
                print("\n".join(renderer.render(new)), flush=True)


def _export(args: argparse.Namespace) -> int:
    from nodmix.sessions.export import export_trajectory

    document = export_trajectory(_open(args.session_key))
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


def _repair_store(args: argparse.Namespace) -> int:
    manager = _manager(read_only=False)
    store = manager.store(args.agent or manager.default_agent_id)
    moved = store.quarantine()
    if moved is None:
        print(f"{store.path}: nothing to repair")
    else:
        kept = len(store.load())
        rest = f"{kept} session(s) recovered from the journal" if kept else "a new one starts empty"
        print(f"moved the corrupt session store to {moved}; {rest}")
    return 0
