"""Which session a `nodmix sessions` command is about: the `KEY_OR_ID` argument, and the
session manager that command reads (read-only unless it changes things)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodmix.sessions.manager import SessionManager


def add_target(p: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The `KEY_OR_ID` argument every subcommand takes (`--session-key` kept as an alias)."""
    p.add_argument(
        "target",
        nargs="?",
        metavar="KEY_OR_ID",
        help="session key (or a name of the default agent), or a session id or its prefix"
        + (" (default agent:main:main)" if optional else ""),
    )
    p.add_argument("--session-key", dest="session_key", help=argparse.SUPPRESS)
    p.set_defaults(target_optional=optional)


def target_of(args: argparse.Namespace) -> str:
    """The session the user named (`KEY_OR_ID` or `--session-key`)."""
    from nodmix.errors import SessionError

    target: str | None = args.target or args.session_key
    if target is None:
        if not getattr(args, "target_optional", False):
            raise SessionError("name a session: nodmix sessions <action> KEY_OR_ID")
        return ""
    return target


def manager(*, read_only: bool = True) -> SessionManager:
    """A session manager on the state directory (read-only unless the command changes things)."""
    from nodmix.config.paths import state_dir
    from nodmix.sessions.manager import SessionManager

    return SessionManager(state_dir(), read_only=read_only)
