"""A scripted model that runs shell commands: `run <command>` makes it call `exec`, and its
answer after the tool result quotes that result, so tests can see what the model saw."""

from __future__ import annotations

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply


def shell_model(request: ModelRequest) -> ModelReply:
    """`run X` -> exec X; a tool result -> `tool said: <result text>`."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        text = "\n".join(getattr(b, "text", "") for b in last.content)
        return ModelReply.text(f"tool said: {text}")
    text = getattr(last, "text", "")
    if text.startswith("run "):
        return ModelReply.tool_call("exec", {"command": text.removeprefix("run ")})
    return ModelReply.text(f"echo: {text}")


def exec_policy(security: str = "allowlist", ask: str = "on-miss", timeout: int = 30) -> str:
    """The `tools` config section (JSON5) for an exec policy."""
    return (
        f"tools: {{ exec: {{ security: '{security}', ask: '{ask}', "
        f"approvalTimeoutSeconds: {timeout} }} }}"
    )
