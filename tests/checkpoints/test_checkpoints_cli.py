"""Pre-compaction checkpoints as a user meets them: chat with `nodmix agent --local`, compact,
list the checkpoints, roll back with `nodmix sessions restore`, undo the roll-back, and a
running runtime (what the gateway runs) continuing from the restored transcript."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..compaction.builders import headed, words
from ..context.runtime_support import write_config

pytestmark = pytest.mark.integration


def respond(request: ModelRequest) -> ModelReply:
    if request.system.startswith(SUMMARIZER_SYSTEM):
        return ModelReply.text(headed("A SUMMARY THAT LOST THE DETAILS"))
    text = getattr(request.messages[-1], "text", "")
    return ModelReply.text(f"noted {text[:10]}")


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(respond) as running:
        yield running


def nodmix(state: Path, *args: str, stdin: str = "") -> Any:
    done = run_nodmix(state, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done


def entries(state: Path) -> list[dict[str, Any]]:
    shown = json.loads(nodmix(state, "sessions", "show", "main", "--json").stdout)
    return list(shown["entries"])


def message_texts(items: list[dict[str, Any]]) -> list[str]:
    return [
        block["text"]
        for e in items
        if e["type"] == "message"
        for block in e["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "text"
    ]


def test_compaction_keeps_a_checkpoint_that_restore_rolls_back_to_and_undoes(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, window=200_000)
    chat = "".join(f"detail {n}: {words(400, f'd{n}')}\n" for n in range(3))
    nodmix(isolated_state, "agent", "--local", "--chat", stdin=chat)
    before = entries(isolated_state)
    assert nodmix(isolated_state, "sessions", "checkpoints", "main").stdout.startswith(
        "agent:main:main: no checkpoints"
    )

    nodmix(isolated_state, "sessions", "compact", "main")
    after = entries(isolated_state)
    assert after[-1]["type"] == "compaction"
    (checkpoint,) = json.loads(
        nodmix(isolated_state, "sessions", "checkpoints", "main", "--json").stdout
    )
    assert checkpoint["trigger"] == "manual" and checkpoint["messages"] == 6
    listed = nodmix(isolated_state, "sessions", "checkpoints", "main").stdout
    assert checkpoint["id"] in listed and "manual compaction" in listed

    restored = nodmix(isolated_state, "sessions", "restore", "main", checkpoint["id"][:15])
    assert f"restored checkpoint {checkpoint['id']}" in restored.stdout
    assert "Undo with:" in restored.stdout
    rolled_back = entries(isolated_state)
    assert not any(e["type"] == "compaction" for e in rolled_back)
    assert message_texts(rolled_back) == message_texts(before)
    assert rolled_back[-1]["customType"] == "nodmix.checkpoint-restored"

    # The restore kept a checkpoint of what it replaced: restoring that one undoes it.
    saved = json.loads(nodmix(isolated_state, "sessions", "checkpoints", "main", "--json").stdout)[
        0
    ]
    assert saved["trigger"] == "restore"
    undone = json.loads(
        nodmix(isolated_state, "sessions", "restore", "main", saved["id"], "--json").stdout
    )
    assert undone["checkpoint"]["id"] == saved["id"]
    again = entries(isolated_state)
    assert [e["type"] for e in again if e["type"] == "compaction"] == ["compaction"]

    bad = run_nodmix(isolated_state, "sessions", "restore", "main", "20990101")
    assert bad.returncode != 0 and "has no checkpoint '20990101'" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.anyio
async def test_a_running_runtime_continues_from_a_transcript_restored_by_the_cli(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            window=200_000,
            compaction={"truncateAfterCompaction": True},
        )
        async with Runtime.open() as runtime:
            for n in range(3):
                await runtime.run_turn(f"fact {n}: the code is {1000 + n}")
            done = await runtime.compact_session(None, "main")
            assert done.result.compacted
            with anyio.fail_after(60):
                restored = await anyio.to_thread.run_sync(
                    lambda: run_nodmix(isolated_state, "sessions", "restore", "main", "latest")
                )
            assert restored.returncode == 0, restored.stderr
            await runtime.run_turn("what was fact 0?")
            sent = server.requests[-1].body["messages"]
    texts = [m["content"] for m in sent if isinstance(m.get("content"), str)]
    assert "fact 0: the code is 1000" in texts
    assert not any("A SUMMARY THAT LOST THE DETAILS" in t for t in texts)
    assert texts[-1] == "what was fact 0?"
