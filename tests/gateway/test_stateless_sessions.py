"""One-shot sessions of stateless OpenAI clients: kept for a while, then archived, never lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import msgspec
import pytest

from nodmix.sessions.keys import fresh_session_name, is_stateless_key
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, write_config
from tests.support.cli import run_nodmix

pytestmark = pytest.mark.anyio


def _chat(text: str, **extra: object) -> dict[str, object]:
    return {"model": "nodmix", "messages": [{"role": "user", "content": text}], **extra}


def test_only_names_the_gateway_generates_count_as_one_shot() -> None:
    assert is_stateless_key(f"agent:main:{fresh_session_name()}", "main")
    assert not is_stateless_key(f"agent:other:{fresh_session_name()}", "main")
    assert not is_stateless_key("agent:main:openai:my-notes", "main")  # a user-chosen name
    assert not is_stateless_key("agent:main:main", "main")


async def test_old_one_shot_sessions_are_archived_and_named_ones_stay(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state, model_server.base_url, "gateway: { openai: { statelessSessionsKept: 3 } }"
    )
    sessions = isolated_state / "agents/main/sessions"
    async with asgi_client() as client:
        named = await client.post("/v1/chat/completions", json=_chat("keep me", user="alice"))
        keys = []
        for n in range(12):
            response = await client.post("/v1/chat/completions", json=_chat(f"one-shot {n}"))
            assert response.status_code == 200
            keys.append(response.headers["x-nodmix-session-key"])
        listed = (await client.get("/v1/models")).status_code  # the gateway still answers
    assert listed == 200 and named.headers["x-nodmix-session-key"] == "agent:main:alice"
    store = msgspec.json.decode((sessions / "sessions.json").read_bytes())
    one_shot = [k for k in store if is_stateless_key(k, "main")]
    assert 3 <= len(one_shot) <= 4  # the limit, plus at most one batch not pruned yet
    assert keys[-1] in one_shot and keys[0] not in one_shot  # the oldest went first
    assert "agent:main:alice" in store
    # Nothing is lost: every one-shot transcript is either listed or in the archive.
    archived = sorted(p.name for p in (sessions / "archive").glob("*.jsonl"))
    listed_files = sorted(store[k]["sessionFile"] for k in one_shot)
    assert len(archived) + len(listed_files) == 12
    assert not set(archived) & set(listed_files)


async def test_a_one_shot_sessions_tokens_show_in_sessions_list_while_the_gateway_runs(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("count my tokens"))
        key = response.headers["x-nodmix-session-key"]
        total = response.json()["usage"]["total_tokens"]
        assert total > 0
        deadline = time.monotonic() + 20
        while True:  # no second turn follows: the counters must still be written soon
            done = await anyio.to_thread.run_sync(
                lambda: run_nodmix(isolated_state, "sessions", "list", "--json")
            )
            rows = {row["key"]: row for row in json.loads(done.stdout)}
            if rows.get(key, {}).get("totalTokens"):
                break
            assert time.monotonic() < deadline, f"no tokens listed for {key}: {rows.get(key)}"
            await anyio.sleep(0.2)
    assert rows[key]["totalTokens"] == total
