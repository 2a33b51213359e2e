"""The optional parts of Nodmix and the extra that installs each.

`pip install nodmix` is the core: the agent, the gateway and its web page, code mode, MCP,
skills, automation and memory keyword search. A chat channel's platform library, vector memory
search (numpy) and web_fetch's main-content extractor are extras: `nodmix[discord]`, ...,
`nodmix[all]`. A part that is configured while its extra is missing gets one line naming the
install command for this installation (`config set`, `doctor`, gateway start) and is refused
where it would run; everything else keeps working.

`PARTS` is the one table: a new channel or heavy tool adds a row (its config key, its extra in
pyproject.toml, and the modules it imports), and every check above picks it up.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from nodmix.errors import NodmixError
from nodmix.invocation import install_command


@dataclass(frozen=True, slots=True)
class Part:
    """One optional part of Nodmix."""

    id: str
    what: str
    """What it is, as a sentence names it ("the Discord channel")."""
    extra: str
    """The extra of pyproject.toml that installs it: `nodmix[<extra>]`."""
    modules: tuple[str, ...]
    """Top-level modules it imports; all must be importable."""
    config_key: str | None
    """The config key that turns it on (present, and not `enabled: false`); None for a part
    that only improves something the core does anyway."""
    package: str | None = None
    """Nodmix's own package that imports the extra's modules at its top (the core imports it
    only once the part is used and `require`d); None when the core imports them lazily."""
    opt_in: bool = False
    """The section turns the part on only with `enabled: true` (not by being present)."""
    when: str | None = None
    """The value `config_key` must have to turn the part on (a choice, not a section)."""


def _channel(channel: str, name: str, modules: tuple[str, ...]) -> Part:
    """A chat channel: `channels.<id>` turns it on, `nodmix[<id>]` installs its library."""
    return Part(
        channel,
        f"the {name} channel",
        channel,
        modules,
        f"channels.{channel}",
        f"nodmix.channels.{channel}",
    )


PARTS: tuple[Part, ...] = (
    _channel("telegram", "Telegram", ("telegram", "httpx")),
    _channel("matrix", "Matrix", ("nio", "aiohttp")),
    _channel("irc", "IRC", ("pydle", "puresasl")),
    _channel("email", "email", ("aioimaplib", "aiosmtplib", "authres")),
    _channel("discord", "Discord", ("discord", "yarl")),
    _channel("slack", "Slack", ("slack_bolt", "slack_sdk", "markdown_to_mrkdwn")),
    _channel("whatsapp", "WhatsApp", ("pywa", "pywa_async")),
    _channel("msteams", "Microsoft Teams", ("microsoft_agents", "jwt", "aiohttp")),
    _channel("googlechat", "Google Chat", ("google.auth", "requests")),
    _channel("xmpp", "XMPP", ("slixmpp", "aiohttp")),
    _channel("mattermost", "Mattermost", ("mattermostautodriver", "aiohttp")),
    Part("embeddings", "vector memory search", "embeddings", ("numpy",), "memory.embeddings"),
    Part("web", "web_fetch's main-content extraction", "web", ("trafilatura",), None),
    Part(
        "postgres",
        "the PostgreSQL state backend",
        "postgres",
        ("psycopg", "psycopg_pool"),
        "state.backend",
        "nodmix.state.postgres",
        when="postgres",
    ),
    Part("browser", "the browser tool", "browser", ("playwright",), "tools.browser", opt_in=True),
    Part("tavily", "web_search through Tavily", "tavily", ("tavily",), None),
    Part("linkup", "web_search through Linkup", "linkup", ("linkup",), None),
)
"""Every optional part (see the module docstring)."""


class MissingExtraError(NodmixError):
    """A configured optional part cannot run: its extra is not installed."""

    def __init__(self, part: Part) -> None:
        self.part = part
        super().__init__(hint(part))


def part(part_id: str) -> Part:
    """The row of `part_id`.

    Raises:
        KeyError: no such part.
    """
    for row in PARTS:
        if row.id == part_id:
            return row
    raise KeyError(part_id)


def installed(row: Part) -> bool:
    """Whether every module of the part can be imported (found, not imported)."""
    return all(_findable(module) for module in row.modules)


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def in_use(row: Part, config: Any) -> bool:
    """Whether `config` turns the part on: its section is present and not `enabled: false`."""
    if row.config_key is None:
        return False
    node: Any = config
    for name in row.config_key.split("."):
        node = getattr(node, _attribute(name), None)
        if node is None:
            return False
    if row.when is not None:
        return bool(node == row.when)
    enabled = getattr(node, "enabled", None)
    return enabled is True if row.opt_in else enabled is not False


def _attribute(key: str) -> str:
    """`apiBaseUrl` -> `api_base_url` (config keys are camelCase, fields snake_case)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def missing(config: Any) -> list[Part]:
    """The parts `config` turns on whose extra is not installed."""
    return [row for row in PARTS if in_use(row, config) and not installed(row)]


def missing_under(config: Any, key: str) -> list[Part]:
    """The missing parts that setting `key` concerns (`channels.discord.token`, `channels`)."""
    top = key.split("[", 1)[0] + "."
    return [
        row
        for row in missing(config)
        if row.config_key is not None
        and (top.startswith(f"{row.config_key}.") or row.config_key.startswith(top))
    ]


def hint(row: Part) -> str:
    """One line: what needs which extra, and the command that installs it here."""
    where = f" ({row.config_key})" if row.config_key else ""
    return (
        f"{row.what}{where} needs the {row.extra!r} extra, which is not installed: "
        f"{install_line(row.id)}"
    )


def install_line(part_id: str) -> str:
    """The command that installs a part's extra in this installation."""
    row = part(part_id)
    keep = [other.extra for other in PARTS if other is not row and installed(other)]
    return install_command([row.extra], keep=keep)


def require(part_id: str) -> None:
    """Refuse a part whose extra is missing.

    Raises:
        MissingExtraError: the part's modules cannot be imported (the message is the hint).
    """
    row = part(part_id)
    if not installed(row):
        raise MissingExtraError(row)
