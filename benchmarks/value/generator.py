"""Deterministic, realistic tool definitions for the code-mode value benchmarks.

Domains (CRM, calendar, tickets, cloud, payments, HR, ...) are described in
`benchmarks/fixtures/tool_domains.toml` as entities with their fields plus hand-written domain
operations. Each entity expands into the
usual CRUD-style tools (`crm_contact_list`, `crm_contact_get`, ...) whose descriptions and
optional parameters are picked by a random generator seeded with the tool name, so the catalog
is identical on every run and adding a tool never changes another one.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.value.schema import compile_schema, is_required, property_name

SEED = "nodmix-value-1"
DOMAINS_FILE = Path(__file__).resolve().parent.parent / "fixtures" / "tool_domains.toml"
OP_CODES = {"l": "list", "g": "get", "c": "create", "u": "update", "d": "delete", "a": "archive"}
OP_CODES["s"] = "search"


@dataclass(frozen=True, slots=True)
class Entity:
    """A record type of a domain and the standard operations it gets."""

    name: str
    """Singular, snake_case (`contact`, `time_off_request`)."""
    gloss: str
    """What it is, as the API's documentation would say it."""
    fields: tuple[str, ...]
    """Properties for create/update (`!` = required on create)."""
    filters: tuple[str, ...]
    """Properties for list/search filters."""
    ops: str = "lgcud"
    """Standard operations: l(ist) g(et) c(reate) u(pdate) d(elete) a(rchive) s(earch)."""
    plural: str = ""

    @property
    def words(self) -> str:
        return self.name.replace("_", " ")

    @property
    def words_plural(self) -> str:
        return self.plural or _plural(self.words)


@dataclass(frozen=True, slots=True)
class Op:
    """A hand-written operation: tool `<prefix>_<name>`."""

    name: str
    description: str
    params: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Domain:
    prefix: str
    system: str
    """How descriptions refer to the system (`the CRM`, `Google Calendar`)."""
    entities: tuple[Entity, ...] = ()
    ops: tuple[Op, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A generated tool definition."""

    name: str
    owner: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


def _props(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(";") if p.strip())


def load_domains(path: Path = DOMAINS_FILE) -> list[Domain]:
    """The domains described in the TOML file."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: list[Domain] = []
    for raw in data["domain"]:
        entities = tuple(
            Entity(
                e["name"],
                e["gloss"],
                _props(e["fields"]),
                _props(e["filters"]),
                e.get("ops", "lgcud"),
                e.get("plural", ""),
            )
            for e in raw.get("entity", [])
        )
        ops = tuple(Op(o["name"], o["description"], _props(o["params"])) for o in raw.get("op", []))
        out.append(Domain(raw["prefix"], raw["system"], entities, ops))
    return out


def _plural(words: str) -> str:
    if words.endswith(("s", "x", "ch", "sh")):
        return words + "es"
    if words.endswith("y") and words[-2:-1] not in "aeiou":
        return words[:-1] + "ies"
    return words + "s"


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _names(props: Sequence[str]) -> list[str]:
    return [property_name(p).replace("_", " ") for p in props]


def _list(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    filters = rng.sample(list(e.filters), k=min(len(e.filters), rng.randint(1, 4)))
    params = [*filters, "limit:int(1,200)=Maximum items per page (default 50).", "cursor:str"]
    if rng.random() < 0.4:
        params.append("sort:enum(created_desc|created_asc|updated_desc)")
    by = _join(_names(filters))
    text = rng.choice(
        [
            f"List {e.words_plural} in {domain.system}, newest first. Filter by {by}. Results "
            "come in pages of up to `limit` items; pass `cursor` from the previous response to "
            "get the next page.",
            f"Return a page of {e.words_plural} ({e.gloss}) from {domain.system}, optionally "
            f"filtered by {by}.",
            f"Lists {e.words_plural} with cursor pagination. Supports filtering by {by}.",
        ]
    )
    return text, params


def _get(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    extra = rng.choice(
        [
            "include:list=Related records to embed in the response.",
            "fields:list=Only return these fields (default: all).",
            "expand:bool=Inline linked objects instead of returning their ids.",
        ]
    )
    shown = _join(_names(e.fields[:4]))
    text = rng.choice(
        [
            f"Get a single {e.words} by id and return all of its fields, such as {shown}.",
            f"Fetch one {e.words} ({e.gloss}) from {domain.system} by its id.",
            f"Retrieve the full record of a {e.words}: {shown} and timestamps.",
        ]
    )
    return text, [f"{e.name}_id!:id", extra]


def _create(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    required = [f for f in e.fields if is_required(f)]
    optional = [f for f in e.fields if not is_required(f)]
    k = min(len(optional), max(1, 7 - len(required)), rng.randint(2, 5))
    picked = set(rng.sample(optional, k=k))
    params = [f for f in e.fields if f in required or f in picked]
    need = _join(_names(required)) or "nothing"
    text = rng.choice(
        [
            f"Create a {e.words} in {domain.system}: {e.gloss}. Returns the new {e.words} "
            "including its id.",
            f"Add a new {e.words} ({e.gloss}). Required: {need}.",
            f"Creates a {e.words}. Fields not given take {domain.system}'s defaults.",
        ]
    )
    return text, params


def _update(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    fields = [f.replace("!:", ":", 1) for f in e.fields]
    k = min(len(fields), rng.randint(2, 6))
    picked = set(rng.sample(fields, k=k))
    params = [f"{e.name}_id!:id", *(f for f in fields if f in picked)]
    text = rng.choice(
        [
            f"Update an existing {e.words}. Only the fields you pass are changed; omitted "
            "fields keep their values.",
            f"Change fields of a {e.words} ({e.gloss}) identified by its id.",
            f"Edit a {e.words} in {domain.system} (partial update).",
        ]
    )
    return text, params


def _delete(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    extra = rng.choice(
        ["force:bool=Delete even if other records still reference it.", "reason:str"]
    )
    text = rng.choice(
        [
            f"Delete a {e.words} permanently. This cannot be undone.",
            f"Remove a {e.words} from {domain.system} by id.",
        ]
    )
    return text, [f"{e.name}_id!:id", extra]


def _archive(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    text = (
        f"Archive a {e.words} so it no longer appears in default lists; archived "
        f"{e.words_plural} can be restored later."
    )
    return text, [f"{e.name}_id!:id", "reason:str=Shown in the audit log."]


def _search(domain: Domain, e: Entity, rng: random.Random) -> tuple[str, list[str]]:
    filters = rng.sample(list(e.filters), k=min(len(e.filters), rng.randint(1, 3)))
    shown = _join(_names(e.fields[:3]))
    text = (
        f"Search {e.words_plural} by free text (matches {shown}); best matches first. "
        f"{e.gloss[:1].upper() + e.gloss[1:]}."
    )
    return text, ["query!:str=Words to look for.", *filters, "limit:int(1,100)"]


_BUILDERS = {
    "list": _list,
    "get": _get,
    "create": _create,
    "update": _update,
    "delete": _delete,
    "archive": _archive,
    "search": _search,
}


def expand(domain: Domain) -> list[ToolDef]:
    """Every tool of a domain: entity operations, then the hand-written ones."""
    out: list[ToolDef] = []
    for entity in domain.entities:
        for code in entity.ops:
            op = OP_CODES[code]
            name = f"{domain.prefix}_{entity.name}_{op}"
            rng = random.Random(f"{SEED}:{name}")
            description, params = _BUILDERS[op](domain, entity, rng)
            out.append(ToolDef(name, domain.prefix, description, compile_schema(params, name)))
    for op_def in domain.ops:
        name = f"{domain.prefix}_{op_def.name}"
        schema = compile_schema(op_def.params, name)
        out.append(ToolDef(name, domain.prefix, op_def.description, schema))
    return out


def generate(domains: Sequence[Domain]) -> list[ToolDef]:
    """Tool definitions of every domain, in domain order; names must be unique."""
    tools = [tool for domain in domains for tool in expand(domain)]
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ValueError(f"duplicate generated tool {tool.name}")
        seen.add(tool.name)
    return tools


def shuffled(tools: Sequence[ToolDef]) -> list[ToolDef]:
    """The catalog order: a seeded shuffle, so any prefix mixes domains."""
    order = sorted(tools, key=lambda t: t.name)
    random.Random(SEED).shuffle(order)
    return order
