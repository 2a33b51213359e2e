"""The `nodmix.json` schema.

Every section is a strict `msgspec.Struct`: an unknown key or a wrong type is an error that the
loader turns into one line naming the file, the dotted key and what was expected. Keys are
camelCase in the file and snake_case here. `None` means "not set": the code that uses a field
resolves its default (and clamps it), which is what lets per-agent sections merge over globals.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec


class Section(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """Base of every config section."""


# ---- models -------------------------------------------------------------------------------


class ModelEntry(Section, frozen=True):
    """A model served by a provider."""

    id: str
    name: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None


class ProviderConfig(Section, frozen=True):
    """`models.providers.<id>`: one model endpoint. Built-in presets fill what is left out."""

    api: Literal["openai-completions", "anthropic-messages"] | None = None
    base_url: str | None = None
    api_key: str | None = None
    """A literal key or `${ENV_VAR}`."""
    headers: dict[str, str] = {}
    models: list[ModelEntry] = []


class ModelsConfig(Section, frozen=True):
    """`models`."""

    providers: dict[str, ProviderConfig] = {}


class ModelSelection(Section, frozen=True):
    """`agents.defaults.model`: the primary model and the fallback chain (`provider/model`)."""

    primary: str | None = None
    fallbacks: list[str] = []


# ---- tools and code mode ----------------------------------------------------------------------

CodeModeLanguage = Literal["javascript", "typescript"]


class CodeModeConfig(Section, frozen=True):
    """`tools.codeMode` in object form. Only `enabled: true` turns code mode on."""

    enabled: bool | None = None
    runtime: Literal["quickjs-wasi"] | None = None
    mode: Literal["only"] | None = None
    languages: list[CodeModeLanguage] | None = None
    timeout_ms: int | None = None
    memory_limit_bytes: int | None = None
    max_output_bytes: int | None = None
    max_snapshot_bytes: int | None = None
    max_pending_tool_calls: int | None = None
    max_queued_tool_calls: int | None = None
    snapshot_ttl_seconds: int | None = None
    search_default_limit: int | None = None
    max_search_limit: int | None = None


class ExecToolConfig(Section, frozen=True):
    """`tools.exec`: the shell tool."""

    timeout_seconds: int | None = None
    max_output_bytes: int | None = None


class WebFetchToolConfig(Section, frozen=True):
    """`tools.webFetch`."""

    max_bytes: int | None = None
    timeout_seconds: int | None = None


class ToolsConfig(Section, frozen=True):
    """`tools`: policy and per-tool settings."""

    allow: list[str] | None = None
    """When set, only these tool names (or `group:<owner>` / MCP server names) are available."""
    deny: list[str] = []
    code_mode: bool | CodeModeConfig | None = None
    exec: ExecToolConfig | None = None
    web_fetch: WebFetchToolConfig | None = None


class AgentToolsConfig(Section, frozen=True):
    """`agents.list[].tools`: per-agent policy, merged over `tools`."""

    allow: list[str] | None = None
    deny: list[str] = []
    code_mode: bool | CodeModeConfig | None = None


# ---- compaction -------------------------------------------------------------------------------


class MemoryFlushConfig(Section, frozen=True):
    """`compaction.memoryFlush`: a silent turn before compaction that writes durable notes."""

    enabled: bool | None = None
    model: str | None = None
    soft_threshold_tokens: int | None = None
    prompt: str | None = None
    system_prompt: str | None = None


class CompactionConfig(Section, frozen=True):
    """`agents.defaults.compaction` (and per agent)."""

    mode: Literal["default", "safeguard", "off"] | None = None
    reserve_tokens: int | None = None
    keep_recent_tokens: int | None = None
    model: str | None = None
    identifier_policy: Literal["strict", "off", "custom"] | None = None
    identifier_instructions: str | None = None
    custom_instructions: str | None = None
    notify_user: bool | None = None
    memory_flush: MemoryFlushConfig | None = None
    truncate_after_compaction: bool | None = None
    max_active_transcript_bytes: int | str | None = None
    provider: str | None = None
    timeout_seconds: int | None = None


# ---- agents -----------------------------------------------------------------------------------


class AgentDefaults(Section, frozen=True):
    """`agents.defaults`."""

    model: ModelSelection = ModelSelection()
    workspace: str | None = None
    compaction: CompactionConfig | None = None
    max_steps: int | None = None
    timeout_seconds: int | None = None
    instructions: str | None = None
    """Extra system-prompt text for every agent."""


class AgentConfig(Section, frozen=True):
    """`agents.list[]`: one agent."""

    id: str
    name: str | None = None
    model: str | ModelSelection | None = None
    workspace: str | None = None
    tools: AgentToolsConfig | None = None
    compaction: CompactionConfig | None = None
    instructions: str | None = None


class AgentsConfig(Section, frozen=True):
    """`agents`."""

    defaults: AgentDefaults = AgentDefaults()
    entries: list[AgentConfig] = msgspec.field(default_factory=list, name="list")
    """`agents.list`; named `entries` here because `list` would shadow the builtin."""


# ---- plugins ----------------------------------------------------------------------------------


class PluginEntry(Section, frozen=True):
    """`plugins.entries.<id>`."""

    enabled: bool = True
    config: dict[str, Any] = {}


class PluginLoadConfig(Section, frozen=True):
    """`plugins.load`."""

    paths: list[str] = []


class PluginSlots(Section, frozen=True):
    """`plugins.slots`: exclusive choices among registered implementations."""

    context_engine: str | None = None


class PluginsConfig(Section, frozen=True):
    """`plugins`."""

    entries: dict[str, PluginEntry] = {}
    load: PluginLoadConfig = PluginLoadConfig()
    slots: PluginSlots = PluginSlots()


# ---- MCP --------------------------------------------------------------------------------------


class MCPToolFilter(Section, frozen=True):
    """`mcp.servers.<name>.tools`."""

    include: list[str] | None = None
    exclude: list[str] = []


class MCPServerConfig(Section, frozen=True):
    """`mcp.servers.<name>`: stdio (`command`) or remote (`url`)."""

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    transport: Literal["streamable-http", "sse"] | None = None
    enabled: bool = True
    timeout_ms: int | None = None
    tools: MCPToolFilter | None = None


class MCPConfig(Section, frozen=True):
    """`mcp`."""

    servers: dict[str, MCPServerConfig] = {}


# ---- gateway ----------------------------------------------------------------------------------


class GatewayAuthConfig(Section, frozen=True):
    """`gateway.auth`."""

    token: str | None = None
    """A literal token or `${ENV_VAR}`; `NODMIX_GATEWAY_TOKEN` also works."""


class GatewayOpenAIConfig(Section, frozen=True):
    """`gateway.openai`: the OpenAI-compatible API."""

    stateless_sessions_kept: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """How many one-shot sessions (requests that name no session) each agent keeps in its
    session list; older ones are archived to `sessions/archive/`. Default 500."""


class GatewayConfig(Section, frozen=True):
    """`gateway`."""

    port: int | None = None
    bind: str | None = None
    auth: GatewayAuthConfig = GatewayAuthConfig()
    openai: GatewayOpenAIConfig = GatewayOpenAIConfig()


class NodmixConfig(Section, frozen=True):
    """The whole `nodmix.json`."""

    models: ModelsConfig = ModelsConfig()
    agents: AgentsConfig = AgentsConfig()
    tools: ToolsConfig = ToolsConfig()
    plugins: PluginsConfig = PluginsConfig()
    mcp: MCPConfig = MCPConfig()
    gateway: GatewayConfig = GatewayConfig()
