"""The tool policy of sandboxed sessions: `tools.sandbox.tools` (and an agent's own).

A sandboxed session's commands run under bubblewrap, and its core tools keep to the sandbox's
rules (`exec` wrapped, `web_fetch` kept off private addresses, the workspace guard). Tools that
run elsewhere do not: an MCP server is a process of the host with whatever it can reach, and a
plugin's tools are code of the Nodmix process. So a sandboxed session gets only the tools that
honour the sandbox, after the usual `tools.allow`/`deny`, unless this policy lets more in:

```json5
{ tools: { sandbox: { tools: {
    allow: ["group:core"],        // replaces the default list
    alsoAllow: ["bundle-mcp"],    // added to it: every MCP server's tools (or "mcp:github"...)
    deny: ["cron"],               // taken out
} } } }
```

The default list is `group:core`, `group:skills` (reading the offered skills) and
`group:client` (a client app's own functions run in the app). Entries use the `tools.allow`
grammar (`nodmix.tools.policy`). An agent's `tools.sandbox.tools.allow` replaces the global
list; `alsoAllow` and `deny` add up.
"""

from __future__ import annotations

from typing import Final

from nodmix.config.schema import AgentToolsConfig, SandboxToolPolicyConfig, ToolsConfig
from nodmix.tools.policy import ToolPolicy

DEFAULT_ALLOW: Final = ("group:core", "group:skills", "group:client")


def _section(tools: ToolsConfig | AgentToolsConfig | None) -> SandboxToolPolicyConfig | None:
    sandbox = tools.sandbox if tools is not None else None
    return sandbox.tools if sandbox is not None else None


def sandbox_tool_policy(tools: ToolsConfig, agent_tools: AgentToolsConfig | None) -> ToolPolicy:
    """The policy sandboxed sessions of an agent apply on top of its tool policy."""
    shared, own = _section(tools), _section(agent_tools)
    allow: list[str] = list(DEFAULT_ALLOW)
    deny: list[str] = []
    for section in (shared, own):
        if section is None:
            continue
        if section.allow is not None:
            allow = list(section.allow)
    for section in (shared, own):
        if section is not None:
            allow += [e for e in section.also_allow if e not in allow]
            deny += [e for e in section.deny if e not in deny]
    return ToolPolicy(allow=tuple(allow), deny=tuple(deny))
