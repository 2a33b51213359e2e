"""Tool policy: which tools a run may use, from `tools.allow` / `tools.deny`.

Entry grammar (the same for allow and deny lists; matching is case-sensitive):

| Entry                        | Matches                                                     |
|------------------------------|-------------------------------------------------------------|
| `*`                          | every tool                                                  |
| `read`                       | the tool whose model-visible name is `read`, **and** every  |
|                              | tool owned by something named `read` (plugin, MCP server)   |
| `nodmix:core:read`           | the tool with that catalog id (`<source>:<owner>:<name>`)   |
| `mcp:time`, `nodmix:notes`   | every tool of that source and owner (`<source>:<owner>`)    |
| `plugin:notes`               | every tool of plugin `notes` (same as `nodmix:notes`)       |
| `group:core`                 | every tool owned by `core` (any `group:<owner>` works)      |
| `group:plugins`              | every plugin tool (source `nodmix`, owner other than core)  |
| `group:mcp`, `group:client`  | every MCP tool / every client-provided tool                 |
| `bundle-mcp`                 | every MCP tool (the same as `group:mcp`)                    |

A `*` inside an entry matches any run of characters (`mcp:time:*`, `web_*`). Bare words match
owners too because that is how people think of MCP servers and plugins (`deny: ["github"]`).

Semantics: with no allow list every tool is allowed; with an allow list only matching tools are;
an empty allow list (`allow: []`) means the run has no tools at all. Deny always wins. An
agent's `allow` replaces the global one when set; deny lists add up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import msgspec

from nodmix.config.schema import AgentToolsConfig, ToolsConfig
from nodmix.tools.base import CORE_OWNER, Tool

_GROUP_SOURCES = {"mcp": "mcp", "client": "client"}
BUNDLE_MCP = "bundle-mcp"
"""Every MCP server's tools, as one name (what a sandbox policy lets in, for example)."""


@lru_cache(maxsize=512)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in text.split("*")))


def _like(pattern: str, value: str) -> bool:
    if "*" not in pattern:
        return pattern == value
    return _pattern(pattern).fullmatch(value) is not None


def entry_matches(entry: str, tool: Tool) -> bool:
    """Whether one policy entry selects `tool` (see the module docstring for the grammar)."""
    entry = entry.strip()
    origin = tool.origin
    owner = origin.owner.strip() or CORE_OWNER
    if entry == "*":
        return True
    if entry == BUNDLE_MCP:
        return origin.source == "mcp"
    if entry.startswith("group:"):
        group = entry.removeprefix("group:")
        if group == "plugins":
            return origin.source == "nodmix" and owner != CORE_OWNER
        if group in _GROUP_SOURCES:
            return origin.source == _GROUP_SOURCES[group]
        return _like(group, owner)
    if entry.startswith("plugin:"):
        plugin = entry.removeprefix("plugin:")
        return origin.source == "nodmix" and owner != CORE_OWNER and _like(plugin, owner)
    parts = entry.split(":", 2)
    if len(parts) == 3:
        return _like(entry, origin.id)
    if len(parts) == 2:
        return _like(parts[0], origin.source) and _like(parts[1], owner)
    return _like(entry, tool.spec.name) or _like(entry, owner)


class ToolPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """An allow list (or none) and a deny list of policy entries."""

    allow: Sequence[str] | None = None
    """`None`: everything not denied is allowed. `[]`: no tools at all."""
    deny: Sequence[str] = ()

    @classmethod
    def from_config(cls, tools: ToolsConfig | None) -> ToolPolicy:
        """The global policy from the `tools` config section."""
        if tools is None:
            return cls()
        return cls(
            allow=None if tools.allow is None else tuple(tools.allow), deny=tuple(tools.deny)
        )

    def merged(self, agent_tools: AgentToolsConfig | None) -> ToolPolicy:
        """This policy with an agent's `tools` section applied over it.

        The agent's `allow` replaces this one when set; the deny lists are combined.
        """
        if agent_tools is None:
            return self
        allow = self.allow if agent_tools.allow is None else tuple(agent_tools.allow)
        deny = (*self.deny, *(e for e in agent_tools.deny if e not in self.deny))
        return ToolPolicy(allow=allow, deny=deny)

    @property
    def disables_tools(self) -> bool:
        """True when the allow list is empty: the run gets no tools (and no code mode)."""
        return self.allow is not None and not self.allow

    def allows(self, tool: Tool) -> bool:
        """Whether `tool` passes the policy."""
        if any(entry_matches(entry, tool) for entry in self.deny):
            return False
        if self.allow is None:
            return True
        return any(entry_matches(entry, tool) for entry in self.allow)

    def filter(self, tools: Sequence[Tool]) -> list[Tool]:
        """The tools that pass the policy, in their original order."""
        return [tool for tool in tools if self.allows(tool)]
