"""Checking tool arguments against the tool's JSON Schema, phrased for the model.

jsonschema is imported on first use: most turns never call a tool with a non-trivial schema
until well after start-up, and the import pulls in `referencing` and `rpds`.
"""

from __future__ import annotations

import logging
from typing import Any

from nodmix.messages import JsonObject

logger = logging.getLogger(__name__)

_MAX_PROBLEMS = 10
_MAX_PROBLEM_CHARS = 300
_CACHE_SIZE = 256
# Keys that describe an object schema without constraining its values.
_DESCRIPTIVE_KEYS = frozenset({"type", "properties", "title", "description", "$schema", "$id"})


def is_trivial(schema: JsonObject) -> bool:
    """Whether the schema accepts every JSON object (so validating it is pointless)."""
    if schema.get("properties") or schema.get("required"):
        return False
    extra = {key: value for key, value in schema.items() if key not in _DESCRIPTIVE_KEYS}
    if extra and extra != {"additionalProperties": True}:
        return False
    return bool(schema.get("type", "object") == "object")


def _describe(error: Any) -> str:
    path = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    ).lstrip(".")
    message = str(error.message)
    if len(message) > _MAX_PROBLEM_CHARS:
        # jsonschema quotes the offending value, which may be a whole file's content.
        message = message[: _MAX_PROBLEM_CHARS - 3] + "..."
    return f"`{path}`: {message}" if path else message


class SchemaValidator:
    """Validates argument objects, caching one compiled validator per schema object."""

    def __init__(self) -> None:
        """Create an empty validator cache."""
        # Keyed by id(); the schema itself is kept in the value so the id cannot be reused.
        self._cache: dict[int, tuple[JsonObject, Any]] = {}
        # `is_trivial` per schema object, the same way (a code-mode cell calls a tool per await).
        self._trivial: dict[int, tuple[JsonObject, bool]] = {}

    def problems(self, schema: JsonObject, args: Any) -> list[str]:
        """The ways `args` violates `schema`, one readable line each (empty when valid).

        A schema that is itself invalid is logged and skipped: the model cannot fix it.
        """
        if not isinstance(args, dict):
            return [f"the arguments must be a JSON object, not {type(args).__name__}"]
        if self._is_trivial(schema):
            return []
        validator = self._compiled(schema)
        if validator is None:
            return []
        # Sorted by location, then text, so the same mistake always reads the same way.
        errors = sorted(
            validator.iter_errors(args), key=lambda e: ([str(p) for p in e.path], str(e.message))
        )
        lines = [_describe(error) for error in errors[:_MAX_PROBLEMS]]
        if len(errors) > _MAX_PROBLEMS:
            lines.append(f"... and {len(errors) - _MAX_PROBLEMS} more problems")
        return lines

    def _is_trivial(self, schema: JsonObject) -> bool:
        known = self._trivial.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        trivial = is_trivial(schema)
        if len(self._trivial) >= _CACHE_SIZE:
            self._trivial.pop(next(iter(self._trivial)))
        self._trivial[id(schema)] = (schema, trivial)
        return trivial

    def _compiled(self, schema: JsonObject) -> Any:
        cached = self._cache.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        from jsonschema import exceptions, validators  # type: ignore[import-untyped,unused-ignore]

        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        try:
            cls.check_schema(schema)
            compiled = cls(schema)
        except exceptions.SchemaError as exc:
            logger.warning("skipping argument validation, invalid tool schema: %s", exc.message)
            compiled = None
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.pop(next(iter(self._cache)))
        self._cache[id(schema)] = (schema, compiled)
        return compiled
