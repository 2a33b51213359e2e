"""The `nodmix.json` schema.

Every section is a strict `msgspec.Struct`: an unknown key or a wrong type is an error that the
loader turns into one line naming the file, the dotted key and what was expected. Keys are
camelCase in the file and snake_case here. `None` means "not set": the code that uses a field
resolves its default (and clamps it), which is what lets per-agent sections merge over globals.
"""

from typing import Annotated, Any, Literal

import msgspec

from nodmix.config.automation_schema import AutomationConfig, HeartbeatConfig, HooksConfig
from nodmix.config.channel_schema import BindingConfig, ChannelsConfig, SessionConfig
from nodmix.config.media_schema import MediaConfig, MessagesConfig, ToolsMediaConfig
from nodmix.config.section import Section
from nodmix.config.state_schema import StateConfig
from nodmix.config.subagents_schema import SubagentsConfig
from nodmix.config.web_schema import BrowserToolConfig, WebToolsConfig

# ---- models -------------------------------------------------------------------------------


class ModelEntry(Section, frozen=True):
    """A model served by a provider."""

    id: str
    name: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    input: list[Literal["text", "image"]] | None = None
    """What the model takes: `["text"]` (default) or `["text", "image"]` (a vision model;
    the presets set it for the vision models they list)."""


class ModelTimeouts(Section, frozen=True):
    """`models.providers.<id>.timeouts` and `agents.list[].modelTimeouts`: waits on a model."""

    connect_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Seconds to open the connection (default 10)."""
    idle_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Seconds without a stream event (keep-alive comments do not count; default 60)."""


class RetryConfig(Section, frozen=True):
    """`models.providers.<id>.retry`: retries of rate limits, outages and timeouts."""

    attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] | None = None
    """Total attempts, including the first (default 4)."""
    max_delay_seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None
    """Cap on one wait, `Retry-After` included (default 30)."""


class ProviderConfig(Section, frozen=True):
    """`models.providers.<id>`: one model endpoint. Built-in presets fill what is left out."""

    api: Literal["openai-completions", "anthropic-messages"] | None = None
    base_url: str | None = None
    api_key: str | None = None
    """A literal key or `${ENV_VAR}`."""
    headers: dict[str, str] = {}
    models: list[ModelEntry] = []
    timeouts: ModelTimeouts | None = None
    retry: RetryConfig | None = None


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
    run_store: Literal["file", "memory"] | None = None
    """Where suspended runs live (process-wide, top-level `tools.codeMode` only): `file`
    (default, under the state dir, survives a restart) or `memory`."""
    max_source_bytes: int | None = None
    telemetry_to_model: bool | None = None


class ExecToolConfig(Section, frozen=True):
    """`tools.exec`: the shell tool."""

    timeout_seconds: int | None = None
    max_output_bytes: int | None = None
    security: Literal["deny", "allowlist", "full"] | None = None
    """Who may run what: `deny` (never), `allowlist` (approved patterns), `full` (anything).
    Default: `full` for the owner's CLI, web page and API; `allowlist` for channel sessions."""
    ask: Literal["off", "on-miss", "always"] | None = None
    """When to ask the person talking to the agent: `off`, `on-miss` (a command the allowlist
    does not cover), `always`. Default: `off` for the owner, `on-miss` for channel sessions."""
    approval_timeout_seconds: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """An unanswered approval request is denied after this long. 120 s."""


class WebFetchToolConfig(Section, frozen=True):
    """`tools.webFetch`."""

    max_bytes: int | None = None
    timeout_seconds: int | None = None
    allow_private_network: bool | None = None
    """Let a sandboxed session fetch loopback, link-local and private addresses. Default false."""


class SandboxToolPolicyConfig(Section, frozen=True):
    """`tools.sandbox.tools`: which tools a sandboxed session may use (see
    `nodmix.tools.sandbox_policy`)."""

    allow: list[str] | None = None
    """Replaces the default list (`group:core`, `group:skills`, `group:client`)."""
    also_allow: list[str] = []
    """Added to the allow list, e.g. `["bundle-mcp"]` for every MCP server."""
    deny: list[str] = []


class ToolsSandboxConfig(Section, frozen=True):
    """`tools.sandbox`: the tools of sandboxed sessions."""

    tools: SandboxToolPolicyConfig | None = None


class ToolsConfig(Section, frozen=True):
    """`tools`: policy and per-tool settings."""

    allow: list[str] | None = None
    """When set, only these tool names (or `group:<owner>` / MCP server names) are available."""
    deny: list[str] = []
    code_mode: bool | CodeModeConfig | None = None
    exec: ExecToolConfig | None = None
    web_fetch: WebFetchToolConfig | None = None
    sandbox: ToolsSandboxConfig | None = None
    web: WebToolsConfig | None = None
    """`tools.web.search`: the `web_search` provider."""
    browser: BrowserToolConfig | None = None
    """The `browser` tool (a real Chromium)."""
    media: ToolsMediaConfig | None = None
    """Voice notes and audio files transcribed to text (`tools.media.audio`)."""


class AgentToolsConfig(Section, frozen=True):
    """`agents.list[].tools`: per-agent policy, merged over `tools`."""

    allow: list[str] | None = None
    deny: list[str] = []
    code_mode: bool | CodeModeConfig | None = None
    exec: ExecToolConfig | None = None
    """The agent's own `tools.exec` keys, each over the global one."""
    sandbox: ToolsSandboxConfig | None = None
    """The agent's own sandbox tool policy: `allow` replaces, `alsoAllow`/`deny` add."""


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


class SandboxConfig(Section, frozen=True):
    """`agents.defaults.sandbox` (and per agent): which sessions run `exec` under bubblewrap."""

    mode: Literal["off", "non-main", "all"] | None = None
    """`off`, `non-main` (every session but the agent's `main` one) or `all`. Unset: `off`,
    or `non-main` once a chat channel is configured."""
    network: bool | None = None
    """Give sandboxed commands the network. Default false."""
    cpu_seconds: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """CPU time per process (RLIMIT_CPU). Default 600."""
    memory_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Address space per process (RLIMIT_AS). Default 4 GiB."""
    file_size_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Largest file a command may write (RLIMIT_FSIZE). Default 1 GiB."""
    workspace_access: Literal["protected", "ro", "rw"] | None = None
    """What turns that do not speak for the owner (group chats, per-peer DMs, automation) may
    write in the workspace, with the file tools and in the sandbox: `protected` (default:
    everything but MEMORY.md, HEARTBEAT.md, memory/ and skills/), `ro` or `rw`."""


class AgentDefaults(Section, frozen=True):
    """`agents.defaults`."""

    model: ModelSelection = ModelSelection()
    workspace: str | None = None
    sandbox: SandboxConfig | None = None
    """Which sessions run `exec` under bubblewrap, and its limits."""
    compaction: CompactionConfig | None = None
    max_steps: int | None = None
    timeout_seconds: Annotated[int, msgspec.Meta(gt=0)] | None = None
    """Seconds a whole turn may take (default 600)."""
    instructions: str | None = None
    """Extra system-prompt text for every agent."""
    max_tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None
    """Output token limit sent with each model request (default: the model's `maxTokens`)."""
    max_output_bytes: Annotated[int, msgspec.Meta(gt=0)] | None = None
    """Cap on one reply's text and tool-argument bytes (default 1 MiB)."""
    heartbeat: HeartbeatConfig | None = None
    """A periodic turn over the workspace's `HEARTBEAT.md` (off by default)."""
    media: MediaConfig | None = None
    """Images in conversations: downscaling, how long they stay, a describing model."""
    subagents: SubagentsConfig | None = None
    """Delegation: `sessions_spawn` and the other session tools (`config/subagents_schema.py`)."""


class AgentConfig(Section, frozen=True):
    """`agents.list[]`: one agent."""

    id: str
    name: str | None = None
    model: str | ModelSelection | None = None
    workspace: str | None = None
    sandbox: SandboxConfig | None = None
    tools: AgentToolsConfig | None = None
    compaction: CompactionConfig | None = None
    instructions: str | None = None
    timeout_seconds: Annotated[int, msgspec.Meta(gt=0)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(gt=0)] | None = None
    max_output_bytes: Annotated[int, msgspec.Meta(gt=0)] | None = None
    model_timeouts: ModelTimeouts | None = None
    """This agent's connect and idle waits, over every provider's `timeouts`."""
    skills: list[str] | None = None
    """Skill allowlist for this agent (names); unset offers every eligible skill."""
    media: MediaConfig | None = None
    """This agent's `agents.defaults.media` keys, each over the default one."""
    subagents: SubagentsConfig | None = None
    """This agent's own `subagents` keys, each over `agents.defaults.subagents`."""


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
    memory: str | None = None
    """The memory backend that answers `memory_search`/`memory_get` (default `builtin`)."""


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


# ---- memory -----------------------------------------------------------------------------------


class MemoryEmbeddingsConfig(Section, frozen=True):
    """`memory.embeddings`: an OpenAI-compatible `/v1/embeddings` endpoint (hybrid search)."""

    base_url: str
    """Base URL ending in `/v1` (a local server works too)."""
    model: str
    api_key: str | None = None
    """A literal key or `${ENV_VAR}`."""
    headers: dict[str, str] = {}
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """How long one embeddings request may take. 30 s."""
    batch_size: Annotated[int, msgspec.Meta(ge=1, le=2048)] | None = None
    """Texts per request. 64."""


SHARE_PATTERN = r"^(group|dm):[a-z][a-z0-9_-]*:\S+$|^webhook:\S+$"
"""`memory.shareWith` entries."""


class MemoryConfig(Section, frozen=True):
    """`memory`: searchable memory over `MEMORY.md`, `memory/**/*.md` and, optionally, sessions."""

    enabled: bool | None = None
    """Offer `memory_search`/`memory_get` (default true)."""
    sessions: bool | None = None
    """Also index the agent's past session transcripts (default false)."""
    embeddings: MemoryEmbeddingsConfig | None = None
    """Without it search is keyword-only (FTS5/BM25)."""
    chunk_tokens: Annotated[int, msgspec.Meta(ge=32, le=8192)] | None = None
    """Target chunk size in tokens (about 4 characters each). 400."""
    chunk_overlap_tokens: Annotated[int, msgspec.Meta(ge=0, le=4096)] | None = None
    """Tokens repeated from the end of one chunk at the start of the next. 80."""
    max_results: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    """Default `maxResults` of `memory_search`. 6."""
    min_score: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    """Default `minScore` of `memory_search`. 0.05."""
    vector_weight: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    """Share of the vector score in hybrid ranking (the keyword score gets the rest). 0.6."""
    share_with: list[Annotated[str, msgspec.Meta(pattern=SHARE_PATTERN)]] = []
    """Chats that may read the owner's memory (`MEMORY.md`, `memory/`) although they do not
    speak for the owner: `group:<channel>:<chatId>`, `dm:<channel>:<senderId>`,
    `webhook:<name>`. Everything else that is not the owner gets none of it (the owner's own
    cron jobs and the heartbeat read it anyway)."""


# ---- skills -----------------------------------------------------------------------------------


class SkillEntry(Section, frozen=True):
    """`skills.entries.<name>`: per-skill settings."""

    enabled: bool | None = None
    """`false` never offers the skill."""
    env: dict[str, str] = {}
    """Variables that count as set for the skill's `requires.env`."""
    api_key: str | None = None
    """A literal key or `${ENV_VAR}`; satisfies the skill's `primaryEnv` variable."""


class SkillsLoadConfig(Section, frozen=True):
    """`skills.load`."""

    extra_dirs: list[str] = []
    """More folders of skills, searched after the workspace's `skills/` (later wins)."""


class SkillsConfig(Section, frozen=True):
    """`skills`."""

    load: SkillsLoadConfig = SkillsLoadConfig()
    entries: dict[str, SkillEntry] = {}


# ---- gateway ----------------------------------------------------------------------------------


class GatewayAuthConfig(Section, frozen=True):
    """`gateway.auth`."""

    mode: Literal["token", "none"] | None = None
    """`token` (default): every API and WebSocket request carries the token; without a
    configured one the gateway makes its own in `<state>/gateway/token`. `none`: no
    authentication at all, loopback only (any local process is the owner)."""
    token: str | None = None
    """A literal token or `${ENV_VAR}`; `NODMIX_GATEWAY_TOKEN` also works."""


class GatewayOpenAIConfig(Section, frozen=True):
    """`gateway.openai`: the OpenAI-compatible API."""

    stateless_sessions_kept: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """How many one-shot sessions (requests that name no session) each agent keeps in its
    session list; older ones are archived to `sessions/archive/`. Default 500."""


class GatewayToolsConfig(Section, frozen=True):
    """`gateway.tools`: `POST /tools/invoke`."""

    allow_unauthenticated: bool | None = None
    """Let a gateway without a token run `exec` through `/tools/invoke` (off by default)."""


BIND_ALIASES = {"loopback": "127.0.0.1", "localhost": "127.0.0.1", "lan": "0.0.0.0"}
"""`gateway.bind` names; any other value must be an IP address."""


class GatewayConfig(Section, frozen=True):
    """`gateway`."""

    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] | None = None
    bind: str | None = None
    """`loopback` (default), `lan` or an IP address."""
    auth: GatewayAuthConfig = GatewayAuthConfig()
    openai: GatewayOpenAIConfig = GatewayOpenAIConfig()
    tools: GatewayToolsConfig = GatewayToolsConfig()
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Largest request body (HTTP) or WebSocket message accepted; larger gets 413. 8 MiB."""
    request_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """How long a client may take to send a request's headers, and then its body. 30 s."""
    keep_alive_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """How long an idle keep-alive connection stays open between requests. 5 s."""
    max_connections: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Open connections (HTTP and WebSocket) at most; more are refused with 503. 1000."""
    max_concurrent_uploads: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """`POST /media/upload` bodies received at once; one more gets 503. 8."""
    max_uploads_per_client: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Uploads received at once from one client address; one more gets 429. 4."""


class NodmixConfig(Section, frozen=True):
    """The whole `nodmix.json`."""

    models: ModelsConfig = ModelsConfig()
    agents: AgentsConfig = AgentsConfig()
    tools: ToolsConfig = ToolsConfig()
    plugins: PluginsConfig = PluginsConfig()
    mcp: MCPConfig = MCPConfig()
    gateway: GatewayConfig = GatewayConfig()
    memory: MemoryConfig = MemoryConfig()
    channels: ChannelsConfig = ChannelsConfig()
    session: SessionConfig = SessionConfig()
    bindings: list[BindingConfig] = []
    skills: SkillsConfig = SkillsConfig()
    automation: AutomationConfig = AutomationConfig()
    hooks: HooksConfig = HooksConfig()
    state: StateConfig = StateConfig()
    messages: MessagesConfig = MessagesConfig()
