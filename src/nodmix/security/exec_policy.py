"""Who is talking (the turn's origin) and what `exec` may do for them.

`tools.exec.security` (`deny` | `allowlist` | `full`) and `tools.exec.ask` (`off` | `on-miss` |
`always`) decide, per command, whether it runs, needs approval, or is refused. An agent's own
`tools.exec` keys win over the global ones. A key that is set nowhere gets a default that fits
who is talking: the owner (a turn with no origin: the CLI, the web page, the OpenAI-compatible
API, `/tools/invoke`) keeps `full` + `off`, i.e. commands run as they always did; a turn from a
channel (`nodmix.origin.TurnOrigin`) gets `allowlist` + `on-miss`.

`decide` is on the path of every `exec` call and must stay cheap: no I/O, parsing is cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from nodmix.config.schema import AgentToolsConfig, ExecToolConfig, ToolsConfig
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import PatternIndex, covers
from nodmix.security.commands import parse_command

Security: TypeAlias = Literal["deny", "allowlist", "full"]
Ask: TypeAlias = Literal["off", "on-miss", "always"]
Verdict: TypeAlias = Literal["run", "ask", "deny"]

DEFAULT_APPROVAL_TIMEOUT_SECONDS = 120


def describe_origin(origin: TurnOrigin | None) -> str:
    """A short label: `owner`, or `channel:<id>` (`channel:telegram`)."""
    return "owner" if origin is None else f"channel:{origin.channel}"


@dataclass(frozen=True, slots=True)
class ExecRules:
    """The effective `tools.exec` policy of one turn."""

    security: Security
    ask: Ask
    timeout_seconds: float
    configured: bool = False
    """Whether any of the keys was set (the owner's defaults mean no check at all)."""

    @property
    def unrestricted(self) -> bool:
        """Commands run without any check (`full` and `ask: off`)."""
        return self.security == "full" and self.ask == "off"


def resolve_rules(
    tools: ToolsConfig, agent_tools: AgentToolsConfig | None, origin: TurnOrigin | None
) -> ExecRules:
    """Merge the global and the agent's `tools.exec` and fill the origin's defaults."""
    glob = tools.exec or ExecToolConfig()
    own = (agent_tools.exec if agent_tools else None) or ExecToolConfig()
    security = own.security or glob.security
    ask = own.ask or glob.ask
    timeout = own.approval_timeout_seconds or glob.approval_timeout_seconds
    configured = security is not None or ask is not None
    if origin is None:
        security, ask = security or "full", ask or "off"
    else:
        security, ask = security or "allowlist", ask or "on-miss"
    return ExecRules(
        security=security,
        ask=ask,
        timeout_seconds=float(timeout or DEFAULT_APPROVAL_TIMEOUT_SECONDS),
        configured=configured,
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one command, and why (shown in approval requests and refusals)."""

    verdict: Verdict
    reason: str


_RUN = Decision("run", "allowed")


def decide(rules: ExecRules, command: str, patterns: PatternIndex, agent_id: str) -> Decision:
    """Run, ask, or deny `command` under `rules` and the allowlist."""
    if rules.security == "deny":
        return Decision("deny", "exec is disabled here (tools.exec.security: deny)")
    if rules.ask == "always":
        return Decision("ask", "every command needs approval (tools.exec.ask: always)")
    if rules.security == "full":
        return _RUN
    parsed = parse_command(command)
    if covers(patterns, parsed, agent_id):
        return _RUN
    why = parsed.opaque or "the command is not on the exec allowlist"
    if rules.ask == "off":
        return Decision("deny", f"{why}, and approvals are off (tools.exec.ask: off)")
    return Decision("ask", why)
