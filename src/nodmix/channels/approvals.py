"""Exec approvals on chat channels: only the owner answers them.

A request is posted to the chat its turn came from and, when that is not the owner's own DM,
to the owner's DM on the same channel too (the latest one the owner wrote from). `/approve
<id>`, `/always <id>` or `/deny <id>` answers it, and only from the owner
(`channels.<id>.ownerIds`): in the chat that asked (answering that chat's requests), or in the
owner's DM (answering any request). Anyone else's answer is refused with one line and logged,
so a group member can never run a command by approving it, not even their own.

The commands are immediate (answered while the turn that asked is still running; a queued
command would only arrive after the request timed out).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from nodmix.channels.commands import ChatCommand, CommandCall, register_command
from nodmix.channels.manager import ChannelManager
from nodmix.channels.types import OutboundMessage
from nodmix.security.approvals import ApprovalBatch, ApprovalBroker

log = logging.getLogger(__name__)

AnswerCommand = Callable[[str, str, str, bool], Awaitable[str]]
"""`(command, args, session_key, anywhere) -> reply`: the security layer's chat-command
handler (`anywhere`: the request may belong to any session)."""

NOT_OWNER = "Only the owner can answer approval requests (channels.{channel}.ownerIds)."

_HELP = {
    "approve": "run a command waiting for approval once: /approve <id>",
    "always": "run it and always allow commands like it: /always <id>",
    "deny": "refuse a command waiting for approval: /deny <id>",
}


def approval_text(batch: ApprovalBatch, *, owner: bool = True) -> str:
    """The message that asks the chat (one block per request, then how to answer); `owner`:
    it goes to the owner's DM (elsewhere it says whose approval is needed)."""
    whose = "your" if owner else "the owner's"
    lines = [f"The assistant wants to run a shell command and needs {whose} approval:"]
    for request in batch.requests:
        # Where it would run is the host's business: only the owner's DM names the directory.
        where = f"in {request.cwd} " if owner else ""
        lines += [
            "",
            f"[{request.id}] {request.command}",
            f"  {where}(agent {request.agent_id}; {request.reason})",
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
    if not owner:
        lines.append("Only the owner can answer.")
    return "\n".join(lines)


class ChannelApprovalPresenter:
    """Posts approval batches to the chat of the turn that asked."""

    def __init__(self, channels: ChannelManager) -> None:
        self._channels = channels

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Send the batch to its origin chat, and to the owner's DM when that is another chat;
        a batch that reaches nobody is denied at once, rather than left for nobody to answer
        until its timeout."""
        origin = batch.requests[0].origin
        if origin is None:  # not a channel turn: nothing to post to
            return
        in_owner_dm = origin.owner and origin.chat_type == "dm"
        targets = [(origin.chat_id, origin.thread_id, in_owner_dm)]
        owner_chat = self._channels.owner_chats.get(origin.channel)
        if not in_owner_dm and owner_chat is not None and owner_chat != origin.chat_id:
            targets.append((owner_chat, None, True))
        sent = 0
        for chat_id, thread_id, owner in targets:
            message = OutboundMessage(
                chat_id=chat_id, text=approval_text(batch, owner=owner), thread_id=thread_id
            )
            try:
                await self._channels.send(origin.channel, message)
                sent += 1
            except Exception as exc:
                log.warning("approval request could not be sent to %s: %s", origin.channel, exc)
        if not sent:
            for request in batch.requests:
                broker.resolve(request.id, "deny", by=f"{origin.channel} (not delivered)")


def register_approval_commands(answer: AnswerCommand) -> None:
    """Add `/approve`, `/always` and `/deny` to every channel's chat commands."""
    for name, help_text in _HELP.items():

        async def handler(call: CommandCall, name: str = name) -> str:
            msg = call.message
            if not call.manager.is_owner(msg):
                log.warning(
                    "%s: /%s from %s in %s refused: not the owner",
                    msg.channel,
                    name,
                    msg.sender_id,
                    msg.chat_id,
                )
                status = call.manager.statuses.get(msg.channel)
                if status is not None:
                    status.count("refuse", "approval answer from a non-owner")
                return NOT_OWNER.format(channel=msg.channel)
            # In the owner's DM any request can be answered; elsewhere that chat's only.
            return await answer(f"/{name}", call.args, call.session_key, msg.chat_type == "dm")

        register_command(ChatCommand(name=name, help=help_text, handler=handler, immediate=True))
