"""Chat commands that work in every channel: a registry others extend.

A command is `/name [args]` (Telegram's `/name@botname` too). `immediate` commands answer at
once, even while a turn runs (`/stop`, `/status`, `/help`); the others (`/new`, `/compact`)
go through the session's queue and are run by the runtime like a turn. Another package adds a
command with `register_command(ChatCommand(...))` (for example `/approve <id>`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage


class CommandHost(Protocol):
    """What a command may use of the channels that run it (`ChannelManager`): the session
    lanes, the hook that speaks replies (`channels/voice.py`), if one is wired, who the owner
    is, and the channels' counters."""

    @property
    def voice(self) -> object: ...

    @property
    def statuses(self) -> Mapping[str, ChannelStatus]: ...

    def is_owner(self, msg: InboundMessage) -> bool:
        """Whether the message's sender is the channel's owner (`channels.<id>.ownerIds`)."""
        ...

    def lane_state(self, key: str) -> tuple[bool, int]:
        """(a turn is running, messages queued) of a session."""
        ...

    def stop_session(self, key: str) -> bool:
        """Stop the running turn of a session; whether one was running."""
        ...


@dataclass(frozen=True, slots=True)
class CommandCall:
    """One command as a chat sent it."""

    name: str
    args: str
    message: InboundMessage
    session_key: str
    agent_id: str
    manager: CommandHost


CommandHandler = Callable[[CommandCall], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class ChatCommand:
    """A `/command`: `handler` answers it; without one, the runtime runs it as a turn."""

    name: str
    help: str
    handler: CommandHandler | None = None
    immediate: bool = True


COMMANDS: dict[str, ChatCommand] = {}
"""Registered commands by name (without the slash)."""


def register_command(command: ChatCommand) -> None:
    """Add (or replace) a chat command."""
    COMMANDS[command.name] = command


def parse_command(text: str) -> tuple[str, str] | None:
    """`(name, args)` when `text` is a registered `/command`, else None."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped.partition(" ")
    name = head[1:].split("@", 1)[0].lower()
    if name not in COMMANDS:
        return None
    return name, rest.strip()


async def _help(call: CommandCall) -> str:
    lines = [f"/{c.name} - {c.help}" for c in sorted(COMMANDS.values(), key=lambda c: c.name)]
    return "Commands:\n" + "\n".join(lines)


async def _status(call: CommandCall) -> str:
    lane = call.manager.lane_state(call.session_key)
    return (
        f"Session {call.session_key} (agent {call.agent_id}): "
        f"{'a turn is running' if lane[0] else 'idle'}, {lane[1]} queued."
    )


async def _stop(call: CommandCall) -> str:
    stopped = call.manager.stop_session(call.session_key)
    return "Stopped the running turn." if stopped else "Nothing is running."


register_command(ChatCommand(name="help", help="list the chat commands", handler=_help))
register_command(ChatCommand(name="status", help="this chat's session and queue", handler=_status))
register_command(ChatCommand(name="stop", help="stop the running turn", handler=_stop))
register_command(
    ChatCommand(name="new", help="start a fresh session (the old one is kept)", immediate=False)
)
register_command(ChatCommand(name="compact", help="summarise older history now", immediate=False))
