"""As a user would: the `nodmix` command, a scripted OpenAI-compatible server, a small window."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..context.runtime_support import TINY_ENGINE_PLUGIN, write_config
from .builders import headed, words

pytestmark = pytest.mark.integration

OVERFLOW = (
    "This model's maximum context length is 6000 tokens. "
    "However, your messages resulted in 6400 tokens."
)


def respond(request: ModelRequest) -> ModelReply:
    if request.system.startswith(SUMMARIZER_SYSTEM):
        return ModelReply.text(headed("EARLIER: the user sent numbered notes"))
    text = getattr(request.messages[-1], "text", "")
    return ModelReply.text(f"noted {text[:12]}; " + words(500, "r"))


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(respond) as running:
        yield running


def nodmix(
    state: Path, *args: str, stdin: str | None = None, pythonpath: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`nodmix` with the plugin folder `pythonpath` importable."""
    env = None
    if pythonpath:
        joined = (pythonpath, os.environ.get("PYTHONPATH"))
        env = {"PYTHONPATH": os.pathsep.join(p for p in joined if p)}
    return run_nodmix(state, *args, env=env, stdin=stdin)


def chat_lines(count: int, size: int = 900) -> str:
    return "".join(f"note {n}: {words(size, f'n{n}')}\n" for n in range(count))


def chat_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [
        r.body
        for r in server.requests
        if r.request is not None and not r.request.system.startswith(SUMMARIZER_SYSTEM)
    ]


def sessions(state: Path) -> list[dict[str, Any]]:
    listed = nodmix(state, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows: list[dict[str, Any]] = json.loads(listed.stdout)
    return rows


def test_a_long_chat_compacts_automatically_and_keeps_answering(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, compaction={"notifyUser": True})
    done = nodmix(isolated_state, "agent", "--local", "--chat", stdin=chat_lines(12))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("noted note") == 12  # every message got its answer
    assert "Conversation compacted" in done.stderr
    (row,) = sessions(isolated_state)
    assert row["compactionCount"] >= 2 and row["messages"] == 24
    last = chat_requests(server)[-1]["messages"]
    sent = json.dumps(last)
    assert "EARLIER: the user sent numbered notes" in last[1]["content"]
    assert "note 0:" not in sent and last[-1]["content"].startswith("note 11:")


def test_sessions_compact_adds_a_compaction_to_the_transcript(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, window=200_000)
    assert (
        nodmix(isolated_state, "agent", "--local", "--chat", stdin=chat_lines(3, 200)).returncode
        == 0
    )
    done = nodmix(
        isolated_state,
        "sessions",
        "compact",
        "main",
        "--instructions",
        "Keep note numbers",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["ok"] and outcome["compacted"] and outcome["key"] == "agent:main:main"
    assert outcome["compactionCount"] == 1 and outcome["result"]["tokensBefore"] > 0
    shown = json.loads(nodmix(isolated_state, "sessions", "show", "main", "--json").stdout)
    entry = shown["entries"][-1]
    assert entry["type"] == "compaction"
    assert entry["summary"].startswith("EARLIER") and entry["tokensBefore"] > 0
    assert {"firstKeptEntryId", "details"} <= set(entry)
    assert "Keep note numbers" in json.dumps(server.requests[-1].body)
    text = nodmix(isolated_state, "sessions", "compact", "main")
    assert text.returncode == 0 and text.stdout.startswith("agent:main:main: ")


def test_a_context_overflow_error_mid_conversation_is_recovered(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    failures: list[int] = []

    def overflow_once(request: ModelRequest) -> ModelReply | ModelError:
        if (
            not request.system.startswith(SUMMARIZER_SYSTEM)
            and len(request.messages) >= 9
            and not failures
        ):
            failures.append(len(request.messages))
            return ModelError(400, OVERFLOW)
        return respond(request)

    server.respond = overflow_once
    write_config(isolated_state, server.base_url, window=200_000)
    done = nodmix(isolated_state, "agent", "--local", "--chat", stdin=chat_lines(6, 300))
    assert done.returncode == 0, done.stderr
    assert failures == [9] and "error" not in done.stderr
    assert done.stdout.count("noted note") == 6
    (row,) = sessions(isolated_state)
    assert row["compactionCount"] == 1
    retried = chat_requests(server)
    after = next(i for i, body in enumerate(retried) if len(body["messages"]) >= 10) + 1
    assert "EARLIER" in retried[after]["messages"][1]["content"]


def test_slash_compact_and_slash_new_in_a_chat(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, window=200_000)
    done = nodmix(
        isolated_state,
        "agent",
        "--local",
        "--chat",
        stdin=chat_lines(2, 100) + "/compact keep it short\n/new\n",
    )
    assert done.returncode == 0, done.stderr
    assert "Compacted the conversation" in done.stdout and "Started a new session." in done.stdout


def _entry_point_distribution(root: Path) -> Path:
    """A real installed-distribution layout: a module plus `.dist-info` with entry points."""
    root.mkdir(parents=True)
    (root / "tiny_engine.py").write_text(TINY_ENGINE_PLUGIN, encoding="utf-8")
    info = root / "tiny_engine-1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-engine\nVersion: 1.2\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[nodmix.plugins]\ntiny = tiny_engine:plugin\n", encoding="utf-8"
    )
    return root


def test_an_entry_point_engine_is_selected_by_the_slot_and_disable_resets_it(
    isolated_state: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    site = str(_entry_point_distribution(tmp_path / "site"))
    write_config(isolated_state, server.base_url, plugins={"slots": {"contextEngine": "tiny"}})
    first = nodmix(isolated_state, "agent", "--local", "-m", "hello engine", pythonpath=site)
    assert first.returncode == 0, first.stderr
    second = nodmix(isolated_state, "agent", "--local", "-m", "second", pythonpath=site)
    assert second.returncode == 0, second.stderr
    body = server.requests[-1].body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "[tiny] second"
    assert body["messages"][0]["content"].startswith("TINY ENGINE ACTIVE")

    disabled = nodmix(isolated_state, "plugins", "disable", "tiny-plugin", pythonpath=site)
    assert disabled.returncode == 0, disabled.stderr
    assert "reset to 'legacy'" in disabled.stdout
    config = json.loads((isolated_state / "nodmix.json").read_text(encoding="utf-8"))
    assert config["plugins"]["slots"]["contextEngine"] == "legacy"
    third = nodmix(isolated_state, "agent", "--local", "-m", "third", pythonpath=site)
    assert third.returncode == 0, third.stderr
    roles = [m["role"] for m in server.requests[-1].body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]


def test_a_missing_engine_is_one_readable_error(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, plugins={"slots": {"contextEngine": "tiny"}})
    done = nodmix(isolated_state, "agent", "--local", "-m", "hi")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "'tiny'" in line and "plugins.slots.contextEngine" in line and "'legacy'" in line
