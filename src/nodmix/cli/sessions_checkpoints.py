"""`nodmix sessions checkpoints KEY_OR_ID` and `nodmix sessions restore KEY_OR_ID CHECKPOINT`:
the transcript copies taken before each compaction, and rolling a session back to one."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import print_json
from nodmix.errors import SessionError
from nodmix.invocation import nodmix_command

if TYPE_CHECKING:
    from nodmix.checkpoints import CheckpointInfo
    from nodmix.sessions.locate import Located
    from nodmix.sessions.manager import SessionManager

RESTORE_WAIT_SECONDS = 15.0
"""How long `restore` waits for a turn running on the session (in any process)."""


def register(
    cmds: argparse._SubParsersAction[argparse.ArgumentParser],
    parent: argparse.ArgumentParser,
    target: Callable[..., None],
) -> None:
    """Add `checkpoints` and `restore` to the `sessions` group."""
    p = cmds.add_parser(
        "checkpoints",
        parents=[parent],
        help="list the copies of a session's transcript taken before each compaction",
    )
    target(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)

    p = cmds.add_parser(
        "restore",
        parents=[parent],
        help="roll a session back to a checkpoint (the current transcript is kept)",
    )
    target(p)
    p.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint id (a unique prefix will do), or latest",
    )
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    p.set_defaults(handler=_restore)


def _manager(*, read_only: bool) -> SessionManager:
    from nodmix.config.paths import state_dir
    from nodmix.sessions.manager import SessionManager

    return SessionManager(state_dir(), read_only=read_only)


def _located(sessions: SessionManager, args: argparse.Namespace) -> Located:
    from nodmix.sessions.locate import locate

    target = args.target or args.session_key
    if not target:
        raise SessionError(f"name a session: nodmix sessions {args.sessions_command} KEY_OR_ID")
    found = locate(sessions, target)
    if found.key is None:
        raise SessionError(f"session {found.session_id} has no key; checkpoints are kept per key")
    return found


def _when(info: CheckpointInfo) -> str:
    return datetime.fromtimestamp(info.created_at / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _why(info: CheckpointInfo) -> str:
    return "a restore" if info.trigger == "restore" else f"{info.trigger} compaction"


def _list(args: argparse.Namespace) -> int:
    import msgspec

    from nodmix.checkpoints import open_checkpoint_store

    sessions = _manager(read_only=True)
    found = _located(sessions, args)
    assert found.key is not None
    infos = open_checkpoint_store(sessions.state_dir).list_checkpoints(found.agent_id, found.key)
    if args.json:
        print_json([msgspec.to_builtins(i) for i in infos])
        return 0
    if not infos:
        print(f"{found.key}: no checkpoints (one is taken before each compaction)")
        return 0
    table = [("CHECKPOINT", "TAKEN", "BEFORE", "MESSAGES", "SIZE")]
    for info in infos:
        size = f"{info.transcript_bytes / 1024:.0f} KB"
        table.append((info.id, _when(info), _why(info), str(info.messages), size))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"\nroll back with: {nodmix_command()} sessions restore {found.key} CHECKPOINT")
    return 0


def _restore(args: argparse.Namespace) -> int:
    import anyio

    return anyio.run(_restore_held, args)


async def _restore_held(args: argparse.Namespace) -> int:
    import msgspec

    from nodmix.checkpoints import open_checkpoint_store
    from nodmix.checkpoints.restore import restore_checkpoint

    sessions = _manager(read_only=False)
    try:
        found = _located(sessions, args)
        assert found.key is not None
        store = open_checkpoint_store(sessions.state_dir)
        async with sessions.hold_turn(found.key, timeout=RESTORE_WAIT_SECONDS):
            done = restore_checkpoint(sessions, store, found.key, args.checkpoint)
    finally:
        sessions.close()
    if args.json:
        data: dict[str, Any] = msgspec.to_builtins(done)
        print_json(data)
        return 0
    info = done.checkpoint
    print(
        f"{done.session_key}: restored checkpoint {info.id} (taken {_when(info)} before "
        f"{_why(info)}, {info.messages} messages); the session continues as {done.session_id}."
    )
    print(f"The transcript it replaced is kept ({done.replaced}).")
    if done.saved is not None:
        undo = f"{nodmix_command()} sessions restore {done.session_key} {done.saved.id}"
        print(f"Undo with: {undo}")
    return 0
