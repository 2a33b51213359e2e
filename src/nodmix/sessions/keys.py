"""Session keys: `agent:<agentId>:<name>`.

A session key names a conversation slot (the CLI's `main`, a chat channel's group, a cron job).
The key is stable; the session id and transcript file behind it change on reset or when
compaction starts a successor transcript. The name may itself contain `:` segments
(`agent:main:telegram:group:42`), so only the first two separators are structural.
"""

from __future__ import annotations

import re
import uuid

import msgspec

from nodmix.config.paths import DEFAULT_AGENT_ID
from nodmix.errors import SessionError

KEY_PREFIX = "agent"
DEFAULT_SESSION_NAME = "main"
DEFAULT_SESSION_KEY = f"{KEY_PREFIX}:{DEFAULT_AGENT_ID}:{DEFAULT_SESSION_NAME}"

# Same rule as `agents.list[].id` in the config loader: the id is also a directory name.
_AGENT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# Names live only inside sessions.json (never in a path), so they are loose: any printable,
# non-space text whose `:`-separated segments are non-empty.
_NAME_SEGMENT = re.compile(r"[^\s:\x00-\x1f\x7f]+")
_MAX_NAME_LENGTH = 256


class SessionKey(msgspec.Struct, frozen=True):
    """A parsed session key; `str(key)` gives `agent:<agent_id>:<name>`."""

    agent_id: str
    name: str

    def __post_init__(self) -> None:
        validate_agent_id(self.agent_id)
        _validate_name(self.name)

    def __str__(self) -> str:
        return f"{KEY_PREFIX}:{self.agent_id}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        """Parse a full key `agent:<agentId>:<name>`.

        Raises:
            SessionError: the text is not a well-formed session key.
        """
        prefix, sep, rest = text.partition(":")
        if prefix != KEY_PREFIX or not sep:
            raise SessionError(
                f"invalid session key {_shown(text)}: expected 'agent:<agentId>:<name>'"
            )
        agent_id, sep, name = rest.partition(":")
        if not sep or not name:
            raise SessionError(
                f"invalid session key {_shown(text)}: missing the session name after the agent id"
                " (expected 'agent:<agentId>:<name>')"
            )
        try:
            return cls(agent_id=agent_id, name=name)
        except SessionError as exc:
            raise SessionError(f"invalid session key {_shown(text)}: {exc}") from None


def _shown(text: str, limit: int = 80) -> str:
    """`text` quoted for an error line, cut to `limit` characters (a key can be huge)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def is_agent_id(text: str) -> bool:
    """Whether `text` is a valid agent id."""
    return _AGENT_ID.fullmatch(text) is not None


def validate_agent_id(agent_id: str) -> str:
    """Return `agent_id` if it is a valid agent id.

    Raises:
        SessionError: the id is not lowercase letters, digits, `-` or `_` (at most 64).
    """
    if not _AGENT_ID.fullmatch(agent_id):
        raise SessionError(
            f"agent id {_shown(agent_id)} must be 1-64 lowercase letters, digits, '-' or '_'"
            " and start with a letter or digit"
        )
    return agent_id


def _validate_name(name: str) -> None:
    if not name:
        raise SessionError("the session name is empty")
    if len(name) > _MAX_NAME_LENGTH:
        raise SessionError(f"the session name is longer than {_MAX_NAME_LENGTH} characters")
    for segment in name.split(":"):
        if not _NAME_SEGMENT.fullmatch(segment):
            raise SessionError(
                f"session name {_shown(name)} has an empty segment or contains whitespace"
                " or control characters"
            )


def format_session_key(agent_id: str, name: str = DEFAULT_SESSION_NAME) -> str:
    """Build and validate the key string for `name` under `agent_id`.

    Raises:
        SessionError: the agent id or the name is invalid.
    """
    return str(SessionKey(agent_id=agent_id, name=name))


def parse_session_key(text: str) -> SessionKey:
    """Parse a full session key (`agent:<agentId>:<name>`).

    Raises:
        SessionError: the text is not a well-formed session key.
    """
    return SessionKey.parse(text)


def resolve_session_key(
    text: str | SessionKey | None, *, default_agent_id: str = DEFAULT_AGENT_ID
) -> SessionKey:
    """Resolve what a user typed into a full key.

    `None` or an empty string means the default session of the default agent; a text that does
    not start with `agent:` is a session name under the default agent (`work` becomes
    `agent:main:work`, `telegram:group:1` becomes `agent:main:telegram:group:1`).

    Raises:
        SessionError: the key or name is malformed.
    """
    if isinstance(text, SessionKey):
        return text
    text = (text or "").strip()
    if not text:
        return SessionKey(agent_id=default_agent_id, name=DEFAULT_SESSION_NAME)
    if text.startswith(f"{KEY_PREFIX}:"):
        return SessionKey.parse(text)
    try:
        return SessionKey(agent_id=default_agent_id, name=text)
    except SessionError as exc:
        raise SessionError(f"invalid session name {_shown(text)}: {exc}") from None


_ONE_SHOT_PREFIX = "openai:"
_ONE_SHOT_NAME = re.compile(r"openai:[0-9a-f]{20}")


def fresh_session_name() -> str:
    """The session name of a request that named none."""
    return f"{_ONE_SHOT_PREFIX}{uuid.uuid4().hex[:20]}"


def is_stateless_key(key: str, agent_id: str | None = None) -> bool:
    """Whether `key` is a one-shot session (`agent:<id>:openai:<20 hex>`), of `agent_id` if
    given."""
    parts = key.split(":", 2)
    if len(parts) != 3 or parts[0] != "agent":
        return False
    if agent_id is not None and parts[1] != agent_id:
        return False
    return _ONE_SHOT_NAME.fullmatch(parts[2]) is not None


def session_kind(key: str) -> str:
    """What kind of conversation a key names, from its shape: `main`, `subagent`, `cron`,
    `hook` (a webhook call), `api` (a one-shot API request), `group` or `dm` (a chat), or
    `other` (a session opened by name)."""
    parts = key.split(":", 2)
    name = parts[2] if len(parts) == 3 and parts[0] == KEY_PREFIX else key
    head, _, rest = name.partition(":")
    if name == DEFAULT_SESSION_NAME:
        return "main"
    if head in ("subagent", "cron", "hook"):
        return head
    if _ONE_SHOT_NAME.fullmatch(name):
        return "api"
    kind = rest.partition(":")[0]
    return kind if kind in ("group", "dm") else "other"
