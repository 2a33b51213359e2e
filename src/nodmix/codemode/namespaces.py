"""Plugin namespaces: concise domain APIs in code mode, backed by the plugin's own catalog tools.

A plugin registers `NamespaceRegistration(global_name="Notes", required_tool_names=[...],
create_scope=...)`. For each run the namespace is visible only when every required tool is in
the run catalog *and* owned by that plugin; its scope (plain data plus `namespace_tool(...)`
markers) is serialised into the guest as the global and `namespaces.<name>`. Guest calls come
back as a path, which the host maps to the declared tool (forged paths match nothing) and runs
as an ordinary catalog tool call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodmix.catalog import CatalogEntry, RunCatalog
from nodmix.codemode.description import NamespacePrompt

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
RESERVED_GLOBALS = frozenset(
    {"tools", "namespaces", "text", "json", "yield_control", "MCP", "API", "ALL_TOOLS"}
    | set(
        "globalThis Object Function Array Number String Boolean Symbol BigInt Math JSON Date "
        "RegExp Error TypeError RangeError SyntaxError ReferenceError EvalError URIError "
        "AggregateError Promise Map Set WeakMap WeakSet WeakRef Proxy Reflect ArrayBuffer "
        "DataView Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array "
        "Uint32Array Float32Array Float64Array BigInt64Array BigUint64Array eval undefined NaN "
        "Infinity isNaN isFinite parseInt parseFloat escape unescape encodeURI decodeURI "
        "encodeURIComponent decodeURIComponent queueMicrotask".split()
    )
)
UNSAFE_KEYS = frozenset({"__proto__", "constructor", "prototype"})
PATH_SEPARATOR = "."


class NamespaceError(ValueError):
    """A registration or scope breaks the namespace rules."""


@dataclass(frozen=True, slots=True)
class NamespaceTool:
    """Marks a scope member as a callable that runs a declared catalog tool."""

    tool_name: str
    input_mapper: Callable[[list[Any]], Any] | None = None
    """Turns the guest's arguments into the tool input; default: the first argument or `{}`."""


def namespace_tool(
    tool_name: str, input_mapper: Callable[[list[Any]], Any] | None = None
) -> NamespaceTool:
    """Declare a namespace function backed by the plugin's tool `tool_name`."""
    return NamespaceTool(tool_name, input_mapper)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceContext:
    """What `create_scope` learns about the run."""

    agent_id: str
    session_key: str
    session_id: str
    run_id: str
    config: Mapping[str, Any] = field(default_factory=dict)
    """The owning plugin's config."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceRegistration:
    """A namespace a plugin offers."""

    id: str
    global_name: str
    required_tool_names: Sequence[str]
    create_scope: Callable[[NamespaceContext], Mapping[str, Any]]
    description: str | None = None
    prompt: str | Callable[[NamespaceContext], str] | None = None


def validate_registration(registration: NamespaceRegistration) -> None:
    """Refuse a registration whose global name or tool list cannot work."""
    name = registration.global_name
    if not _IDENT.match(name):
        raise NamespaceError(f"namespace global name {name!r} is not a JavaScript identifier")
    if name in RESERVED_GLOBALS or name.startswith("__nodmix"):
        raise NamespaceError(f"namespace global name {name!r} collides with a built-in global")
    if not registration.required_tool_names:
        raise NamespaceError(f"namespace {registration.id!r} must declare required_tool_names")


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceTarget:
    """A callable path, resolved on the host to a declared tool of the owning plugin."""

    entry: CatalogEntry
    mapper: Callable[[list[Any]], Any] | None
    label: str

    def resolve(self, args: list[Any]) -> tuple[CatalogEntry, dict[str, Any], str]:
        """Map the guest's arguments to the tool input."""
        try:
            value = self.mapper(list(args)) if self.mapper else (args[0] if args else {})
        except Exception as exc:
            raise ValueError(f"{self.label}: could not map arguments: {exc}") from None
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ValueError(f"{self.label}: the tool input must be an object")
        return self.entry, value, "ns"


@dataclass(slots=True)
class PluginNamespaces:
    """The visible plugin namespaces of one run."""

    descriptors: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, NamespaceTarget] = field(default_factory=dict)
    prompts: list[NamespacePrompt] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def build_plugin_namespaces(
    registrations: Sequence[tuple[str, NamespaceRegistration]],
    catalog: RunCatalog,
    ctx_for: Callable[[str], NamespaceContext],
) -> PluginNamespaces:
    """Visible namespaces of a run: `registrations` are `(plugin id, registration)` pairs."""
    out = PluginNamespaces()
    for owner, reg in sorted(registrations, key=lambda pair: pair[1].id):
        tools = _owned_tools(catalog, owner, reg.required_tool_names)
        if tools is None or reg.global_name in out.descriptors:
            continue
        ctx = ctx_for(owner)
        try:
            scope = reg.create_scope(ctx)
            targets: dict[str, NamespaceTarget] = {}
            tree = _serialize(scope, reg.global_name, tools, targets, set())
            if not isinstance(tree, dict):
                raise NamespaceError("create_scope must return an object")
            prompt = reg.prompt(ctx) if callable(reg.prompt) else reg.prompt
        except Exception as exc:
            out.errors.append(f"namespace {reg.id!r} from plugin {owner!r}: {exc}")
            continue
        out.descriptors[reg.global_name] = tree
        out.targets.update(targets)
        out.prompts.append(
            NamespacePrompt(global_name=reg.global_name, description=reg.description, prompt=prompt)
        )
    return out


def _owned_tools(
    catalog: RunCatalog, owner: str, names: Sequence[str]
) -> dict[str, CatalogEntry] | None:
    found: dict[str, CatalogEntry] = {}
    for name in names:
        entry = next(
            (
                e
                for e in catalog.visible
                if e.name == name and e.source == "nodmix" and e.source_name == owner
            ),
            None,
        )
        if entry is None:
            return None  # absent, denied, or owned by someone else: the namespace stays hidden
        found[name] = entry
    return found


def _serialize(
    value: Any,
    path: str,
    tools: dict[str, CatalogEntry],
    targets: dict[str, NamespaceTarget],
    stack: set[int],
) -> Any:
    if isinstance(value, NamespaceTool):
        entry = tools.get(value.tool_name)
        if entry is None:
            raise NamespaceError(
                f"{path} targets {value.tool_name!r}, which is not in required_tool_names"
            )
        targets[path] = NamespaceTarget(entry=entry, mapper=value.input_mapper, label=path)
        return {"$fn": path}
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if callable(value):
        raise NamespaceError(
            f"{path} is a raw function; wrap tool-backed functions in namespace_tool(...)"
        )
    if isinstance(value, Mapping | list | tuple):
        if id(value) in stack:
            raise NamespaceError(f"{path} is part of a circular structure")
        stack.add(id(value))
        try:
            if isinstance(value, Mapping):
                out: dict[str, Any] = {}
                for key, item in value.items():
                    _check_key(key, path)
                    out[key] = _serialize(item, f"{path}.{key}", tools, targets, stack)
                return out
            return [
                _serialize(item, f"{path}[{i}]", tools, targets, stack)
                for i, item in enumerate(value)
            ]
        finally:
            stack.discard(id(value))
    return str(value)  # class instances and the like cross only as a readable string


def _check_key(key: Any, path: str) -> None:
    if not isinstance(key, str) or not key or PATH_SEPARATOR in key or key in UNSAFE_KEYS:
        raise NamespaceError(f"{path} has an unsafe key {key!r}")
