"""A lost or damaged `sessions.json` is rebuilt from the transcripts by `sessions repair-store`:
conversations made by the real runtime (scripted model over HTTP) stay reachable by their keys."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.config.loader import load_config
from nodmix.messages import Usage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.rebuild import repair_store, salvage_entries
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import NO_RETRY, write_config
from tests.support.cli import run_nodmix


def _answer(request: ModelRequest) -> ModelReply:
    last = request.messages[-1]
    text = "".join(getattr(b, "text", "") for b in getattr(last, "content", ()))
    return ModelReply.text(f"noted: {text}", usage=Usage(input=100, output=7))


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(_answer) as server:
        yield server


async def _converse(turns: list[tuple[str, str]]) -> None:
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        for key, text in turns:
            await runtime.submit(text, session_key=key)


def _store(state: Path) -> dict[str, Any]:
    raw = (state / "agents/main/sessions/sessions.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(raw)
    return data


@pytest.mark.anyio
async def test_repair_store_rebuilds_a_truncated_index_and_every_conversation_continues(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    await _converse(
        [
            ("alpha", "alpha one"),
            ("beta", "beta one"),
            ("gamma", "gamma before new"),
            ("gamma", "/new"),
            ("gamma", "gamma after new"),
            ("alpha", "alpha two"),
        ]
    )
    before = _store(isolated_state)
    assert set(before) == {"agent:main:alpha", "agent:main:beta", "agent:main:gamma"}
    index = isolated_state / "agents/main/sessions/sessions.json"
    raw = index.read_bytes()
    index.write_bytes(raw[: len(raw) // 2])  # a torn write: half the file

    listed = run_nodmix(isolated_state, "sessions", "list")
    assert listed.returncode == 1
    (line,) = listed.stderr.splitlines()
    assert str(index) in line and "nodmix sessions repair-store" in line
    assert "Traceback" not in listed.stderr

    repaired = run_nodmix(isolated_state, "sessions", "repair-store")
    assert repaired.returncode == 0, repaired.stderr
    assert "moved the corrupt session store to" in repaired.stdout
    assert "rebuilt 3 session(s) from the transcripts" in repaired.stdout

    after = _store(isolated_state)
    assert set(after) == set(before)
    for key, old in before.items():
        new = after[key]
        assert new["sessionId"] == old["sessionId"], key  # gamma: the transcript after /new
        assert new["sessionFile"] == old["sessionFile"]
        for counter in ("inputTokens", "outputTokens", "totalTokens", "compactionCount"):
            assert new[counter] == old[counter], (key, counter)
        assert new["model"] == old["model"] == "local/scripted"
        assert new["createdAt"] <= new["updatedAt"]
    assert after["agent:main:alpha"]["totalTokens"] == 2 * 107

    for key, text in (("alpha", "alpha three"), ("gamma", "gamma again"), ("beta", "beta two")):
        turn = run_nodmix(
            isolated_state, "agent", "--local", "-m", text, "--session-key", key, "--json"
        )
        assert turn.returncode == 0, turn.stderr
        assert json.loads(turn.stdout)["sessionId"] == before[f"agent:main:{key}"]["sessionId"]
    sent = [json.dumps(r.body["messages"]) for r in model_server.requests[-3:]]
    assert "alpha one" in sent[0] and "alpha two" in sent[0]
    assert "gamma after new" in sent[1] and "gamma before new" not in sent[1]
    assert "beta one" in sent[2]

    everything = run_nodmix(isolated_state, "sessions", "list", "--all", "--json")
    rows = json.loads(everything.stdout)
    replaced = [r for r in rows if r["status"] == "replaced"]
    assert [r["key"] for r in replaced] == ["agent:main:gamma"]
    shown = run_nodmix(isolated_state, "sessions", "show", replaced[0]["sessionId"][:8])
    assert shown.returncode == 0, shown.stderr
    assert "gamma before new" in shown.stdout and "(replaced)" in shown.stdout


def test_salvage_keeps_every_complete_entry_of_a_torn_index(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    for name in ("a", "b", "c"):
        manager.open(name)
    manager.close()
    raw = (isolated_state / "agents/main/sessions/sessions.json").read_text(encoding="utf-8")
    cut = raw.index('"agent:main:c"') + 20
    assert set(salvage_entries(raw[:cut])) == {"agent:main:a", "agent:main:b"}


def test_transcripts_without_a_recorded_key_get_a_recovered_key_only_when_the_index_is_lost(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("old")
    manager.close()
    path = session.transcript.path
    header, rest = path.read_text(encoding="utf-8").split("\n", 1)
    legacy = json.loads(header)
    del legacy["sessionKey"]  # as written before headers named their key
    path.write_text(json.dumps(legacy) + "\n" + rest, encoding="utf-8")
    store = manager.store("main")

    healthy = repair_store(store, "main")
    assert healthy.quarantined is None and healthy.rebuilt == []  # the index still knows it

    store.path.write_text("{", encoding="utf-8")
    lost = repair_store(store, "main")
    assert lost.quarantined is not None
    assert lost.rebuilt == lost.guessed == [f"agent:main:recovered-{session.session_id[:8]}"]
    assert store.load()[lost.rebuilt[0]].session_file == path.name
