"""Typed access to a core tool's arguments, and the base the core tools share.

The executor validates arguments against each tool's JSON Schema, but tools can also be called
directly (tests, code mode internals), so they read their arguments through these accessors,
which raise a `ToolError` the model can act on instead of a `KeyError` or `TypeError`.
"""

from __future__ import annotations

from nodmix.errors import ToolError
from nodmix.messages import JsonObject
from nodmix.tools.base import CORE_OWNER, ToolOrigin, ToolSpec

PATH_SCHEMA: JsonObject = {
    "type": "string",
    "description": "File path, relative to the workspace (or absolute inside it).",
}
"""The `path` property shared by the file tools' schemas."""


def require_str(args: JsonObject, key: str, *, allow_empty: bool = True) -> str:
    """The string argument `key`; it must be present."""
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"`{key}` is required and must be a string.")
    if not allow_empty and not value:
        raise ToolError(f"`{key}` must not be empty.")
    return value


def optional_int(args: JsonObject, key: str, *, minimum: int) -> int | None:
    """The integer argument `key`, or `None` when absent; it must be at least `minimum`."""
    value = args.get(key)
    if value is None:
        return None
    # bool is an int subclass; JSON `true` is not a line number.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"`{key}` must be an integer.")
    if value < minimum:
        raise ToolError(f"`{key}` must be at least {minimum} (got {value}).")
    return value


def optional_number(args: JsonObject, key: str) -> float | None:
    """The positive number argument `key`, or `None` when absent."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"`{key}` must be a number.")
    if value <= 0:
        raise ToolError(f"`{key}` must be greater than 0 (got {value}).")
    return float(value)


def optional_bool(args: JsonObject, key: str) -> bool:
    """The boolean argument `key`; absent or null is `False`."""
    value = args.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ToolError(f"`{key}` must be true or false.")
    return value


class CoreTool:
    """What the built-in tools share: a fixed spec and the `nodmix:core:<name>` origin.

    Subclasses set `self._spec` in `__init__` and implement `call`.
    """

    _spec: ToolSpec

    @property
    def spec(self) -> ToolSpec:
        """What the model sees."""
        return self._spec

    @property
    def origin(self) -> ToolOrigin:
        """`nodmix:core:<name>`."""
        return ToolOrigin(source="nodmix", owner=CORE_OWNER, name=self._spec.name)
