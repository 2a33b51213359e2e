"""Exec approvals on chat channels: a request is posted to the chat its turn came from, and
`/approve <id>`, `/always <id>` or `/deny <id>` in that chat answers it.

The commands are immediate (answered while the turn that asked is still running; a queued
command would only arrive after the request timed out) and only reach requests of the
session the chat maps to, so one chat can never answer another's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nodmix.channels.commands import ChatCommand, CommandCall, register_command
from nodmix.channels.manager import ChannelManager
from nodmix.channels.types import OutboundMessage
from nodmix.security.approvals import ApprovalBatch, ApprovalBroker

log = logging.getLogger(__name__)

AnswerCommand = Callable[[str, str, str], str]
"""`(command, args, session_key) -> reply`: the security layer's chat-command handler."""

_HELP = {
    "approve": "run a command waiting for approval once: /approve <id>",
    "always": "run it and always allow commands like it: /always <id>",
    "deny": "refuse a command waiting for approval: /deny <id>",
}


def approval_text(batch: ApprovalBatch) -> str:
    """The message that asks the chat (one block per request, then how to answer)."""
    lines = ["The assistant wants to run a shell command and needs your approval:"]
    for request in batch.requests:
        lines += [
            "",
            f"[{request.id}] {request.command}",
            f"  in {request.cwd} (agent {request.agent_id}; {request.reason})",
        ]
    first = batch.requests[0].id
    lines += [
        "",
        "Answer with one of" + (" (one per request):" if len(batch.requests) > 1 else ":"),
        f"/approve {first}",
        f"/always {first}",
        f"/deny {first}",
        "Unanswered requests are refused when they time out.",
    ]
    return "\n".join(lines)


class ChannelApprovalPresenter:
    """Posts approval batches to the chat of the turn that asked."""

    def __init__(self, channels: ChannelManager) -> None:
        self._channels = channels

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Send the batch to its origin chat; a batch that cannot be sent is denied at once,
        rather than left for nobody to answer until its timeout."""
        origin = batch.requests[0].origin
        if origin is None:  # not a channel turn: nothing to post to
            return
        message = OutboundMessage(
            chat_id=origin.chat_id, text=approval_text(batch), thread_id=origin.thread_id
        )
        try:
            await self._channels.send(origin.channel, message)
        except Exception as exc:
            log.warning("approval request could not be sent to %s: %s", origin.channel, exc)
            for request in batch.requests:
                broker.resolve(request.id, "deny", by=f"{origin.channel} (not delivered)")


def register_approval_commands(answer: AnswerCommand) -> None:
    """Add `/approve`, `/always` and `/deny` to every channel's chat commands."""
    for name, help_text in _HELP.items():

        async def handler(call: CommandCall, name: str = name) -> str:
            return answer(f"/{name}", call.args, call.session_key)

        register_command(ChatCommand(name=name, help=help_text, handler=handler, immediate=True))
