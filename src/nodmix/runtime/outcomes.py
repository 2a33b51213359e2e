"""What a submitted chat message produced: a finished turn or a chat command's result."""

from __future__ import annotations

from typing import Any

import msgspec

from nodmix.loop import TurnResult


class TurnOutcome(msgspec.Struct, kw_only=True):
    """A finished turn and where it was recorded."""

    result: TurnResult
    agent_id: str
    session_key: str
    session_id: str

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of a finished turn (`nodmix agent --json`, the gateway's RPC)."""
        result = self.result
        return {
            "reply": result.reply,
            "sessionId": self.session_id,
            "sessionKey": self.session_key,
            "agentId": self.agent_id,
            "model": result.model,
            "usage": msgspec.to_builtins(result.usage),
            "stopReason": result.stop_reason,
            "steps": result.steps,
            "toolCalls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls
            ],
        }


class CommandOutcome(msgspec.Struct, kw_only=True):
    """A chat command (`/new`, `/compact`) that ran instead of a turn."""

    command: str
    message: str
    session_key: str
    session_id: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of a chat command's result."""
        out: dict[str, Any] = {
            "command": self.command,
            "message": self.message,
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
        }
        if self.data:
            out["data"] = msgspec.to_builtins(self.data, enc_hook=str)
        return out
