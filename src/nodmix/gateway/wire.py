"""Run events and outcomes as JSON: what the WebSocket protocol and the CLI client exchange.

Every `RunEvent` becomes `{"kind": ..., <its fields in camelCase>}`; nested messages keep
their transcript encoding (also camelCase), so a tool result looks the same in an event, in
`sessions.history` and in the JSONL file. A finished turn becomes exactly the object that
`nodmix agent --json` prints.
"""

from __future__ import annotations

from typing import Any

import msgspec

from nodmix.events import RunEvent
from nodmix.runtime import CommandOutcome, TurnOutcome


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _fallback(value: Any) -> Any:
    # Tool `details` may hold anything a tool chose to return (paths, sets, objects).
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def to_json(value: Any) -> Any:
    """Plain JSON values for any message, struct, dataclass or container."""
    return msgspec.to_builtins(value, enc_hook=_fallback)


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def event_json(event: RunEvent) -> dict[str, Any]:
    """One run event as a JSON object (`kind` first, fields in camelCase)."""
    names = _FIELDS.get(type(event))
    if names is None:
        names = tuple((name, _camel(name)) for name in event.__struct_fields__ if name != "kind")
        _FIELDS[type(event)] = names
    out: dict[str, Any] = {"kind": event.kind}
    for name, key in names:
        value = getattr(event, name)
        out[key] = value if isinstance(value, str | int | float | bool | None) else to_json(value)
    return out


def outcome_json(outcome: TurnOutcome | CommandOutcome) -> dict[str, Any]:
    """A finished turn (the `nodmix agent --json` shape) or a chat command's result."""
    return outcome.to_json()
