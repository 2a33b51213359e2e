"""`nodmix approvals list|allow|revoke`: the persisted exec allowlist.

Patterns are command lines with globs (`git status`, `git log **`, `ls -la *`; see
`nodmix.security.allowlist`). A running gateway re-reads the file before each check that misses,
so a pattern added here applies to its next command.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from nodmix.cli.common import common_parent, print_json
from nodmix.invocation import command

if TYPE_CHECKING:
    from nodmix.security.allowlist import Allowlist


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `approvals` command group."""
    parent = common_parent()
    p = sub.add_parser(
        "approvals",
        parents=[parent],
        help="list, add or revoke exec allowlist patterns",
        description="The exec allowlist: commands matching a pattern run without asking.",
    )
    cmds = p.add_subparsers(dest="approvals_command", metavar="SUBCOMMAND", required=True)
    q = cmds.add_parser("list", parents=[parent], help="show the allowlist")
    q.add_argument("--agent", metavar="ID", help="only patterns that apply to this agent")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(handler=_list)
    q = cmds.add_parser("allow", parents=[parent], help="add a pattern, e.g. 'git log **'")
    q.add_argument("pattern", help="executable then one glob per argument; a final ** = any rest")
    q.add_argument("--agent", metavar="ID", help="only for this agent (default: every agent)")
    q.set_defaults(handler=_allow)
    q = cmds.add_parser("revoke", parents=[parent], help="remove a pattern by id or text")
    q.add_argument("key", metavar="ID_OR_PATTERN")
    q.set_defaults(handler=_revoke)


def _allowlist() -> Allowlist:
    from nodmix.config.paths import state_dir
    from nodmix.security.allowlist import open_allowlist

    return open_allowlist(state_dir())


def _list(args: argparse.Namespace) -> int:
    allowlist = _allowlist()
    patterns = [p for p in allowlist.patterns if args.agent is None or p.applies_to(args.agent)]
    if args.json:
        print_json({"path": str(allowlist.path), "patterns": [p.to_json() for p in patterns]})
        return 0
    if not patterns:
        example = command("approvals allow 'PATTERN'")
        print(f"The exec allowlist is empty (add one with: {example}).")
        return 0
    for p in patterns:
        print(f"{p.id}  {p.agent:<8}  {p.text}")
    return 0


def _allow(args: argparse.Namespace) -> int:
    from nodmix.errors import NodmixError
    from nodmix.security.allowlist import ALL_AGENTS

    allowlist = _allowlist()
    try:
        pattern = allowlist.add(args.pattern, agent=args.agent or ALL_AGENTS)
    except ValueError as exc:  # a value the command checks: exit 1, like every such mistake
        raise NodmixError(str(exc)) from None
    who = "every agent" if pattern.agent == ALL_AGENTS else f"agent {pattern.agent}"
    print(f"allowed for {who}: {pattern.text} (id {pattern.id})")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    allowlist = _allowlist()
    gone = allowlist.revoke(args.key)
    if not gone:
        print(f"nodmix: error: no pattern with id or text {args.key!r}", file=sys.stderr)
        return 1
    for p in gone:
        print(f"revoked: {p.text} (id {p.id})")
    return 0
