"""`nodmix sessions list --all|repair|repair-store|rename|delete`: the commands that look past
the index or change sessions."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from nodmix.cli.common import print_json, print_table
from nodmix.cli.session_target import add_target, manager, target_of
from nodmix.errors import SessionError


def register(
    cmds: argparse._SubParsersAction[argparse.ArgumentParser],
    parent: argparse.ArgumentParser,
) -> None:
    """Add the subcommands of this module to the `sessions` group."""
    p = cmds.add_parser(
        "repair",
        parents=[parent],
        help="rewrite a transcript without its unreadable lines (the original is kept)",
    )
    add_target(p)
    p.set_defaults(handler=_repair)

    p = cmds.add_parser(
        "repair-store",
        parents=[parent],
        help="rebuild a corrupt or incomplete sessions.json from the transcripts",
    )
    p.add_argument("--agent", metavar="ID", default=None, help="agent (default main)")
    p.set_defaults(handler=_repair_store)

    p = cmds.add_parser("rename", parents=[parent], help="set a session's display title")
    add_target(p)
    p.add_argument("title", metavar="NEW_TITLE")
    p.set_defaults(handler=_rename)

    p = cmds.add_parser(
        "delete", parents=[parent], help="move a session to the trash and forget its key"
    )
    add_target(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask (required without a TTY)")
    p.set_defaults(handler=_delete)


def list_all(args: argparse.Namespace) -> int:
    """`sessions list --all`: every transcript of the agent(s), with its status."""
    from nodmix.sessions.locate import all_transcripts
    from nodmix.subagents.describe import SessionLineage

    sessions = manager()
    lineage = SessionLineage(sessions.state_dir)
    agents = sessions.agent_ids() if args.all_agents else [args.agent or sessions.default_agent_id]
    rows: list[dict[str, Any]] = []
    for agent in agents:
        for found in all_transcripts(sessions, agent):
            entry = found.entry
            modified = found.modified_ms or 0
            place = lineage.describe(found.key, entry)
            rows.append(
                {
                    "key": found.key,
                    "agentId": found.agent_id,
                    "sessionId": found.session_id,
                    "status": found.status,
                    "kind": place["kind"],
                    "parent": place["parent"],
                    "run": place["run"],
                    "title": entry.label if entry else None,
                    "updatedAt": entry.updated_at if entry else modified,
                    "totalTokens": entry.total_tokens if entry else None,
                    "messages": sessions.backend.messages_in(agent, found.path),
                    "file": str(found.path),
                }
            )
    rows.sort(key=lambda r: (r["status"] != "current", -r["updatedAt"], r["sessionId"]))
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no sessions")
        return 0
    table = [
        ("KEY", "SESSION ID", "STATUS", "KIND", "PARENT", "UPDATED", "TOKENS", "MESSAGES", "TITLE")
    ]
    for r in rows:
        updated = datetime.fromtimestamp(r["updatedAt"] / 1000).strftime("%Y-%m-%d %H:%M")
        tokens = "-" if r["totalTokens"] is None else str(r["totalTokens"])
        kind = r["kind"] or "-"
        if r["run"] is not None:
            kind = f"{kind} ({r['run']['status']})"
        table.append(
            (
                r["key"] or "-",
                r["sessionId"],
                r["status"],
                kind,
                r["parent"] or "-",
                updated,
                tokens,
                str(r["messages"]),
                r["title"] or "",
            )
        )
    print_table(table)
    return 0


def _repair(args: argparse.Namespace) -> int:
    from nodmix.sessions.locate import locate
    from nodmix.sessions.repair import repair_transcript
    from nodmix.sessions.successors import restore_seed

    found = locate(manager(), target_of(args))
    done = repair_transcript(found.path)
    seeded = restore_seed(found.path)
    if seeded is None and found.status == "continued" and found.key:
        # The file a compaction continued from: its successor is the one that may lack the
        # summary and kept turns.
        seeded = restore_seed(locate(manager(), found.key).path)
    if done.backup is None and seeded is None:
        print(f"{done.path}: nothing to repair ({done.kept} entries read)")
        return 0
    if done.backup is not None:
        lines = ", ".join(str(d.line) for d in done.dropped) or "none"
        print(
            f"{done.path}: kept {done.kept} entries, dropped line(s) {lines},"
            f" re-linked {done.relinked}; the original is {done.backup}"
        )
    if seeded is not None:
        print(
            f"{seeded.path}: restored the compaction summary and {seeded.seeded - 1} kept"
            f" entries from {seeded.parent.name} ({seeded.kept_after} later entries kept after"
            f" them); the original is {seeded.backup}"
        )
    return 0


def _repair_store(args: argparse.Namespace) -> int:
    from nodmix.sessions.rebuild import repair_store
    from nodmix.sessions.store import SessionStore

    sessions = manager(read_only=False)
    agent = args.agent or sessions.default_agent_id
    store = sessions.store(agent)
    if not isinstance(store, SessionStore):
        raise SessionError(
            f"the {sessions.backend.kind} state backend keeps the session index in the database,"
            " changed in transactions: there is no store file to repair"
        )
    report = repair_store(store, agent)
    if report.quarantined is not None:
        print(f"moved the corrupt session store to {report.quarantined}")
    if report.kept and report.quarantined is not None:
        print(f"{report.kept} session(s) recovered from the journal")
    if report.rebuilt:
        salvaged = f" ({report.salvaged} also found in the damaged file)" if report.salvaged else ""
        print(f"rebuilt {len(report.rebuilt)} session(s) from the transcripts{salvaged}:")
        for key in report.rebuilt:
            print(f"  {key}")
    if report.guessed:
        print(
            f"{len(report.guessed)} transcript(s) did not record their key and got a"
            " `recovered-...` one; rename or delete them as you like"
        )
    for path in report.unreadable:
        print(f"skipped {path}: not a transcript (no valid header)", file=sys.stderr)
    if report.quarantined is None and not report.rebuilt:
        print(f"{report.store}: nothing to repair ({report.kept} session(s) indexed)")
    return 0


def _rename(args: argparse.Namespace) -> int:
    from nodmix.sessions.admin import rename_session
    from nodmix.sessions.locate import locate

    sessions = manager(read_only=False)
    found = locate(sessions, target_of(args))
    rename_session(sessions, found, args.title)
    print(f"{found.key}: title set to {args.title.strip()!r}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from nodmix.sessions.admin import delete_session
    from nodmix.sessions.locate import locate

    sessions = manager(read_only=False)
    found = locate(sessions, target_of(args))
    what = f"{found.key or '-'} (session {found.session_id}, {found.status})"
    if not args.yes:
        if not sys.stdin.isatty():
            raise SessionError(f"not deleting {what}: add --yes to confirm (stdin is not a TTY)")
        answer = input(f"Move {what} to the trash? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not deleted")
            return 1
    moved = delete_session(sessions, found)
    where = moved[0].parent if moved else "the trash"
    print(f"deleted {what}: {len(moved)} file(s) moved to {where}")
    return 0
