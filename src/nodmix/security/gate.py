"""The exec gate: the policy check every tool call passes (after hooks, before the tool runs).

Only the shell tool (`nodmix:core:exec`) is gated; every other call returns at the first line.
The gate finds the turn a call belongs to (by run id, else the session's latest turn; a call
from an unknown turn is treated as a channel's, the cautious default), resolves that turn's
`tools.exec` rules, and either lets the call run, refuses it with a result the model can read,
or asks the person talking to the agent and waits.

A code-mode nested call passes `ctx.extra["approval_waiting"]`, a callback told when the call
starts and stops waiting for an answer, so the program can suspend with reason `approval`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nodmix.messages import JsonObject
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import Allowlist
from nodmix.security.approvals import ApprovalBroker, ApprovalRequest, Outcome
from nodmix.security.commands import parse_command, quote_pattern
from nodmix.security.exec_policy import ExecRules, decide
from nodmix.security.turns import EXEC_TOOL_ID, TurnHandle, TurnRegistry
from nodmix.tools.base import APPROVAL_WAITING, Tool, ToolContext, ToolResult

UNKNOWN_ORIGIN = TurnOrigin(channel="unknown", chat_id="unknown")
"""Stands in for a call whose turn is not known: treated like a channel's (the cautious side)."""

RulesFor = Callable[[str, TurnOrigin | None], ExecRules]
"""`(agent_id, origin) -> rules`, resolved from the live config on every call."""


class ExecGate:
    """Applies `tools.exec.security` / `ask` and the allowlist to `exec` calls."""

    def __init__(
        self,
        *,
        rules_for: RulesFor,
        allowlist: Allowlist,
        broker: ApprovalBroker,
        turns: TurnRegistry,
    ) -> None:
        self.rules_for = rules_for
        self.allowlist = allowlist
        self.broker = broker
        self.turns = turns

    def concerns(self, tool: Tool) -> bool:
        """Only `exec` is checked; every other tool passes."""
        return tool.origin.id == EXEC_TOOL_ID

    async def check(self, tool: Tool, params: JsonObject, ctx: ToolContext) -> ToolResult | None:
        """None when the call may run; otherwise the refusal the model sees."""
        if tool.origin.id != EXEC_TOOL_ID:
            return None
        handle = self.turns.find(ctx.run_id, ctx.session_key) or TurnHandle(UNKNOWN_ORIGIN)
        rules = self.rules_for(ctx.agent_id, handle.origin)
        if rules.unrestricted:
            return None
        command = params.get("command")
        if not isinstance(command, str):
            return None  # the schema check already refused it; nothing would run
        decision = decide(rules, command, self.allowlist.index, ctx.agent_id)
        if decision.verdict != "run" and rules.security == "allowlist" and self.allowlist.refresh():
            decision = decide(rules, command, self.allowlist.index, ctx.agent_id)
        if decision.verdict == "run":
            return None
        if decision.verdict == "deny":
            return _refusal(f"Not run: {decision.reason}.", command, "denied")
        return await self._ask(ctx, handle, rules, command, decision.reason)

    async def _ask(
        self, ctx: ToolContext, handle: TurnHandle, rules: ExecRules, command: str, reason: str
    ) -> ToolResult | None:
        req = ApprovalRequest(
            id=self.broker.new_id(),
            agent_id=ctx.agent_id,
            session_key=ctx.session_key,
            command=command,
            cwd=str(ctx.workspace),
            reason=reason,
            origin=handle.origin,
            expires_at=time.time() + rules.timeout_seconds,
            batch=ctx.parent_call_id,
            emit=handle.emit,
        )
        waiting = ctx.extra.get(APPROVAL_WAITING)
        if callable(waiting):
            waiting(True)
        try:
            outcome = await self.broker.request(req, rules.timeout_seconds)
        finally:
            if callable(waiting):
                waiting(False)
        return self._after(outcome, req, rules, ctx.agent_id)

    def _after(
        self, outcome: Outcome, req: ApprovalRequest, rules: ExecRules, agent_id: str
    ) -> ToolResult | None:
        if outcome == "allow-always":
            parsed = parse_command(req.command)
            for part in parsed.parts:
                self.allowlist.add(quote_pattern(part), agent=agent_id)
            return None
        if outcome == "allow-once":
            return None
        if outcome == "timeout":
            return _refusal(
                f"Not run: nobody approved it within {rules.timeout_seconds:g} s "
                f"(approval {req.id}), so it was denied.",
                req.command,
                "timeout",
            )
        who = f" ({req.answered_by})" if req.answered_by else ""
        return _refusal(
            f"Not run: the user denied this command{who} (approval {req.id}). "
            "Do not retry it; ask the user what to do instead.",
            req.command,
            outcome,
        )


def _refusal(text: str, command: str, outcome: str) -> ToolResult:
    return ToolResult.error(
        f"{text}\nCommand: {command}",
        details={"blocked": True, "approval": outcome, "command": command},
    )
