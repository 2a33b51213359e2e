"""Successor transcripts as a user gets them: `nodmix agent --local --chat` against a scripted
model, then `nodmix sessions compact` with `truncateAfterCompaction`, then the transcript as
`nodmix sessions show --json` prints it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..context.runtime_support import write_config
from .builders import headed, words

pytestmark = pytest.mark.integration

RETRIED = "please summarise the quarterly ferry timetable changes for the harbour office"


def respond(request: ModelRequest) -> ModelReply:
    if request.system.startswith(SUMMARIZER_SYSTEM):
        return ModelReply.text(headed("EARLIER: filler notes"))
    text = getattr(request.messages[-1], "text", "")
    return ModelReply.text(f"answer to {text[:24]}")


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(respond) as running:
        yield running


def shown_messages(state: Path) -> list[dict[str, Any]]:
    shown = run_nodmix(state, "sessions", "show", "main", "--json")
    assert shown.returncode == 0, shown.stderr
    return [
        e["message"]
        for e in json.loads(shown.stdout)["entries"]
        if e["type"] == "message" and not e.get("parentToolCallId")
    ]


def test_a_retried_and_answered_message_is_dropped_with_its_answer_in_the_successor(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state,
        server.base_url,
        window=200_000,
        compaction={"truncateAfterCompaction": True, "keepRecentTokens": 200},
    )
    filler = "".join(f"note {n}: {words(1500, f'f{n}')}\n" for n in range(3))
    chat = f"{filler}{RETRIED}\n{RETRIED}\nand the ferry fares?\n"
    done = run_nodmix(isolated_state, "agent", "--local", "--chat", stdin=chat)
    assert done.returncode == 0, done.stderr
    before = [m["role"] for m in shown_messages(isolated_state)]
    assert before == ["user", "assistant"] * 6

    compacted = run_nodmix(isolated_state, "sessions", "compact", "main", "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["compacted"]

    kept = shown_messages(isolated_state)
    roles = [m["role"] for m in kept]
    assert roles == ["user", "assistant"] * (len(roles) // 2), roles
    texts = [c["text"] for m in kept for c in m["content"] if c.get("type") == "text"]
    assert texts.count(RETRIED) == 1
    assert texts[-2:] == ["and the ferry fares?", "answer to and the ferry fares?"]
