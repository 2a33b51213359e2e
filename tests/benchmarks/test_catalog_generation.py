"""The benchmark catalogs are deterministic, realistic and what the benchmarks claim."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.value.catalog import FIXED, MCP_FIXTURE, catalog_tools, generated_defs, mcp_tools
from benchmarks.value.generator import generate, load_domains
from benchmarks.value.schema import compile_schema

ROOT = Path(__file__).resolve().parents[2]
DIGEST = (
    "from benchmarks.value.catalog import generated_defs; import hashlib, json; "
    "print(hashlib.sha256(json.dumps([[d.name, d.description, d.parameters] "
    "for d in generated_defs()]).encode()).hexdigest())"
)


def _digest() -> str:
    data = [[d.name, d.description, d.parameters] for d in generated_defs()]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def test_generation_is_deterministic_within_and_across_processes() -> None:
    assert generated_defs() == generated_defs()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", DIGEST], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == _digest()


def test_generated_tools_are_unique_and_have_realistic_schemas() -> None:
    from jsonschema import Draft202012Validator

    tools = generate(load_domains())
    assert len(tools) == 480
    assert len({t.name for t in tools}) == 480
    assert len({t.owner for t in tools}) >= 30  # many domains
    for tool in tools:
        Draft202012Validator.check_schema(tool.parameters)
        assert 2 <= len(tool.parameters["properties"]) <= 8, tool.name
        assert tool.name.startswith(f"{tool.owner}_")
        assert 20 <= len(tool.description) <= 400, tool.name
    kinds = json.dumps([t.parameters for t in tools])
    assert '"enum"' in kinds and '"required"' in kinds and '"currency"' in kinds  # nested


def test_catalogs_are_prefixes_of_one_sequence_with_every_source() -> None:
    small, large = catalog_tools(50), catalog_tools(500)
    assert [t.spec.name for t in small] == [t.spec.name for t in large[:50]]
    assert len(large) == 500 and len({t.origin.id for t in large}) == 500
    sources = {t.origin.source for t in large[:FIXED]}
    assert sources == {"nodmix", "mcp"}
    assert [t.spec.name for t in large[:5]] == ["exec", "read", "write", "edit", "web_fetch"]


def test_required_tools_replace_the_last_generated_ones() -> None:
    base = catalog_tools(30)
    forced = catalog_tools(30, include=["crm_contact_lookup", "hr_employee_list"])
    names = [t.spec.name for t in forced]
    assert len(forced) == 30 and {"crm_contact_lookup", "hr_employee_list"} <= set(names)
    assert names[:FIXED] == [t.spec.name for t in base[:FIXED]]
    with pytest.raises(ValueError, match="unknown tools"):
        catalog_tools(30, include=["no_such_tool"])


def test_mcp_fixture_is_the_servers_tools_under_direct_mode_names() -> None:
    data = json.loads(MCP_FIXTURE.read_text(encoding="utf-8"))
    assert set(data["servers"]) == {"time", "everything"}
    tools = mcp_tools()
    raw = sum(len(s["tools"]) for s in data["servers"].values())
    assert len(tools) == raw >= 10
    assert "time__get_current_time" in {t.spec.name for t in tools}
    assert all(t.origin.source == "mcp" for t in tools)


def test_schema_notation() -> None:
    schema = compile_schema(["amount!:money", "status:enum(a|b)=Which.", "n:int(1,5)"], "x")
    assert schema["required"] == ["amount"]
    assert schema["properties"]["amount"]["required"] == ["amount", "currency"]
    status = {"type": "string", "enum": ["a", "b"], "description": "Which."}
    assert schema["properties"]["status"] == status
    assert schema["properties"]["n"]["maximum"] == 5
    with pytest.raises(ValueError):
        compile_schema(["bad spec"], "x")
