"""The run-scoped tool catalog code mode hides behind `exec`/`wait`.

Entries are the run's effective tools after policy, identified by `<source>:<owner>:<name>` and
listed (`entries`, `ALL_TOOLS`) in groups: core tools, tools Nodmix ships beyond the core
(bundled plugins, skills), external plugins, MCP servers, then the client's tools; by id in a
fixed collation within a group. Search ranks in id order whatever the grouping, so its ties stay
deterministic. MCP entries stay in the catalog (policy, hooks, telemetry and transcript
projection share them) but guests reach them only through the `MCP` namespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodmix.catalog.search import SearchIndex, make_doc
from nodmix.context.tokens import chars_to_tokens, estimate_tool_tokens
from nodmix.tools.base import Tool, ToolSource

CONTROL_OWNER = "codemode"
"""Owner of the code-mode `exec`/`wait` tools; never cataloged."""
CONTROL_TOOL_NAMES = frozenset({"tool_search_code", "tool_search", "tool_describe", "tool_call"})
HELPER_NAMES = frozenset({"search", "describe", "call"})
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_PUNCT_ORDER = {c: i for i, c in enumerate("_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$")}


_GROUP_CORE, _GROUP_BUNDLED, _GROUP_EXTERNAL, _GROUP_MCP, _GROUP_CLIENT = range(5)


class CatalogLookupError(LookupError):
    """`describe`/`call` named no entry, or more than one."""


def collation_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Order like a locale-aware compare: `_` < `-` < `:` < digits < letters, case last."""
    primary: list[int] = []
    tertiary: list[int] = []
    for ch in text:
        if ch in _PUNCT_ORDER:
            primary.append(_PUNCT_ORDER[ch])
        elif ch.isdigit():
            primary.append(100 + ord(ch))
        else:
            primary.append(1000 + ord(ch.lower()))
        tertiary.append(1 if ch.isupper() else 0)
    return tuple(primary), tuple(tertiary)


def _group(entry: CatalogEntry, external_owners: frozenset[str]) -> int:
    """Listing group: core, shipped with Nodmix, external plugin, MCP, client."""
    if entry.source == "mcp":
        return _GROUP_MCP
    if entry.source == "client":
        return _GROUP_CLIENT
    if entry.source_name == "core":
        return _GROUP_CORE
    return _GROUP_EXTERNAL if entry.source_name in external_owners else _GROUP_BUNDLED


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One cataloged tool."""

    id: str
    name: str
    description: str
    source: ToolSource
    source_name: str
    tool: Tool
    label: str | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """The tool's JSON Schema."""
        return dict(self.tool.spec.parameters)

    def compact(self) -> dict[str, Any]:
        """The guest-facing entry: no schema."""
        out: dict[str, Any] = {"id": self.id, "name": self.name}
        if self.label:
            out["label"] = self.label
        out.update(
            {"description": self.description, "source": self.source, "sourceName": self.source_name}
        )
        return out

    def with_schema(self) -> dict[str, Any]:
        """The entry plus its input schema (what `tools.describe` returns)."""
        return {**self.compact(), "parameters": self.parameters}


@dataclass(slots=True)
class CatalogCounters:
    """Cumulative counts for a run's catalog; they survive across `exec`/`wait` steps."""

    search: int = 0
    describe: int = 0
    call: int = 0
    steps: int = 0
    """`exec`/`wait` calls, each answering one model request."""
    delivered_chars: int = 0
    """Characters of nested tool results delivered into programs (kept out of the context)."""
    returned_chars: int = 0
    """Characters of values, errors and output that `exec`/`wait` returned to the model."""


@dataclass(slots=True)
class RunCatalog:
    """The catalog of one run."""

    entries: tuple[CatalogEntry, ...]
    counters: CatalogCounters = field(default_factory=CatalogCounters)
    surface_tokens: int = 0
    """Estimated tokens of the tool definitions the model sees instead (`exec`, `wait`)."""
    _by_id: dict[str, CatalogEntry] = field(default_factory=dict)
    _index: SearchIndex | None = None
    _schema_tokens: int | None = None

    @classmethod
    def build(
        cls, tools: Iterable[Tool], *, external_owners: frozenset[str] = frozenset()
    ) -> RunCatalog:
        """Catalog the run's effective tools (control tools are left out). `external_owners`:
        ids of plugins installed apart from Nodmix (listed after the ones it ships)."""
        entries: dict[str, CatalogEntry] = {}
        for tool in tools:
            origin = tool.origin
            if origin.owner == CONTROL_OWNER or tool.spec.name in CONTROL_TOOL_NAMES:
                continue
            entry = CatalogEntry(
                id=origin.id,
                name=tool.spec.name,
                description=tool.spec.description,
                source=origin.source,
                source_name=origin.owner.strip() or "core",
                tool=tool,
                label=tool.spec.label,
            )
            entries.setdefault(entry.id, entry)
        ordered = tuple(
            sorted(
                entries.values(),
                key=lambda e: (_group(e, external_owners), collation_key(e.id)),
            )
        )
        return cls(entries=ordered, _by_id={e.id: e for e in ordered})

    @property
    def visible(self) -> tuple[CatalogEntry, ...]:
        """Entries guests see in `ALL_TOOLS` and `tools.*` (everything but MCP)."""
        return tuple(e for e in self.entries if e.source != "mcp")

    @property
    def mcp(self) -> tuple[CatalogEntry, ...]:
        """MCP entries (reached through the `MCP` namespace only)."""
        return tuple(e for e in self.entries if e.source == "mcp")

    def by_id(self, catalog_id: str) -> CatalogEntry | None:
        """Exact id lookup over every entry, MCP included (host-side dispatch)."""
        return self._by_id.get(catalog_id)

    def find(self, ref: str) -> CatalogEntry:
        """Guest lookup: exact id, then exact name, among non-MCP entries."""
        ref = str(ref).strip()
        entry = self._by_id.get(ref)  # ids are unique: no scan for the usual exact id
        if entry is not None and entry.source != "mcp":
            return entry
        named = [e for e in self.visible if e.name == ref]
        if len(named) == 1:
            return named[0]
        if named:
            raise CatalogLookupError(f"Ambiguous tool name: {ref}; use an exact tool id.")
        raise CatalogLookupError(
            f"Unknown tool id: {ref}. Use tools.search(query) or ALL_TOOLS to find valid ids."
        )

    def search(self, query: str, limit: int) -> list[CatalogEntry]:
        """Best matches for a natural-language query among non-MCP entries."""
        if self._index is None:
            by_id = sorted(self.visible, key=lambda e: collation_key(e.id))
            docs = [
                make_doc(
                    key=e.id,
                    name=e.name,
                    id=e.id,
                    label=e.label,
                    description=e.description,
                    parameters=e.tool.spec.parameters,
                )
                for e in by_id
            ]
            self._index = SearchIndex(docs)
        keys = self._index.rank(query)[:limit]
        return [self._by_id[k] for k in keys]

    def safe_names(self) -> dict[str, CatalogEntry]:
        """Convenience names for `tools.<name>(input)`: identifiers that are unique and don't
        shadow the catalog helpers."""
        counts: dict[str, int] = {}
        for entry in self.visible:
            counts[entry.name] = counts.get(entry.name, 0) + 1
        return {
            e.name: e
            for e in self.visible
            if counts[e.name] == 1 and _IDENTIFIER_RE.match(e.name) and e.name not in HELPER_NAMES
        }

    def schema_tokens(self) -> int:
        """Estimated tokens of every entry's tool definition, as direct mode would send them
        with each model request (computed once per catalog)."""
        if self._schema_tokens is None:
            self._schema_tokens = estimate_tool_tokens([e.tool.spec for e in self.entries])
        return self._schema_tokens

    def tokens_avoided(self) -> dict[str, int]:
        """What code mode kept out of the model's context in this run so far (estimates).

        `schemaTokens`: the catalog's direct-mode tool definitions minus the `exec`/`wait`
        definitions, once per model request answered by an `exec`/`wait` step.
        `resultTokens`: nested tool results delivered into programs minus what the steps
        returned to the model (values, errors, output), never below zero.
        """
        per_request = max(0, self.schema_tokens() - self.surface_tokens)
        counters = self.counters
        schema = per_request * max(1, counters.steps)
        delivered = chars_to_tokens(counters.delivered_chars)
        results = max(0, delivered - chars_to_tokens(counters.returned_chars))
        return {
            "schemaTokens": schema,
            "resultTokens": results,
            "total": schema + results,
            "schemaTokensPerRequest": per_request,
        }

    def telemetry(self, visible_tools: Sequence[str] = ("exec", "wait")) -> dict[str, Any]:
        """Counts for result telemetry: catalog size, sources, search/describe/call totals and
        the tokens code mode avoided."""
        sources = {"nodmix": 0, "mcp": 0, "client": 0}
        for entry in self.entries:
            sources[entry.source] += 1
        return {
            "catalogSize": len(self.entries),
            "sources": sources,
            "searchCount": self.counters.search,
            "describeCount": self.counters.describe,
            "callCount": self.counters.call,
            "visibleTools": list(visible_tools),
            "tokensAvoided": self.tokens_avoided(),
        }
