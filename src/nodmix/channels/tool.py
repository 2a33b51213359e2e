"""The `message` tool: the agent sends a message or files to a chat, under the same rules
that decide who may message it (allowed senders, approved senders, allowed groups, or the chat
the turn came from)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nodmix.channels.types import OutboundMessage
from nodmix.messages import JsonObject
from nodmix.origin import TurnOrigin
from nodmix.security.memory_guard import refusal as memory_refusal
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult


class ChannelAccess(Protocol):
    """What the tool needs of the channel layer (`ChannelManager`, or the runtime's lazy
    front of it)."""

    def configured(self) -> list[str]: ...

    def deliver_refusal(
        self, channel: str, chat_id: str, origin: TurnOrigin | None
    ) -> str | None: ...

    async def send(self, channel: str, message: OutboundMessage) -> list[str]: ...


PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "channel": {
            "type": "string",
            "description": "Channel id, e.g. telegram. Default: the "
            "channel this conversation came from.",
        },
        "to": {
            "type": "string",
            "description": "Chat id. Default: the chat this conversation came from.",
        },
        "text": {"type": "string", "description": "Message text."},
        "attachments": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Workspace-relative paths of files to send.",
        },
    },
    "additionalProperties": False,
}


class MessageTools:
    """The `message` tool as a tool source (present when a channel is configured)."""

    def __init__(self, manager: ChannelAccess) -> None:
        self._manager = manager
        self._tool = FunctionTool.create(
            self._call,
            name="message",
            description="Send a message (and files from the workspace) to a chat on a "
            "configured channel. Only chats allowed to talk to you can be messaged.",
            parameters=PARAMETERS,
            label="Send message",
        )

    async def list_tools(self) -> Sequence[Tool]:
        return [self._tool] if self._manager.configured() else []

    async def _call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        from nodmix.channels.outbound import attachment_paths

        origin = ctx.origin
        channel = str(args.get("channel") or (origin.channel if origin else ""))
        to = str(args.get("to") or (origin.chat_id if origin and origin.channel == channel else ""))
        if not channel or not to:
            return ToolResult.error("name the channel and the chat: {channel, to, text}")
        if channel not in self._manager.configured():
            known = ", ".join(self._manager.configured()) or "none"
            return ToolResult.error(f"channel {channel!r} is not configured (configured: {known})")
        refused = self._manager.deliver_refusal(channel, to, origin)
        if refused is not None:
            return ToolResult.error(refused)
        raw_paths = args.get("attachments") or []
        for raw in raw_paths:
            root = ctx.workspace.resolve()
            hidden = memory_refusal(
                ctx.workspace,
                (root / str(raw)).resolve(),
                written=str(raw),
                origin=origin,
                agent_id=ctx.agent_id,
                session_key=ctx.session_key,
                verb="send",
            )
            if hidden is not None:
                return ToolResult.error(hidden)
        try:
            files = attachment_paths([str(p) for p in raw_paths], ctx.workspace)
        except ValueError as exc:
            return ToolResult.error(str(exc))
        thread = origin.thread_id if origin and origin.chat_id == to else None
        message = OutboundMessage(
            chat_id=to, text=str(args.get("text") or ""), thread_id=thread, attachments=files
        )
        if not message.text.strip() and not files:
            return ToolResult.error("nothing to send: give text or attachments")
        try:
            ids = await self._manager.send(channel, message)
        except Exception as exc:
            return ToolResult.error(f"sending failed: {exc}")
        return ToolResult.text(
            f"sent {len(ids)} message(s) to {channel} {to}", details={"messageIds": ids}
        )
