"""Several real gateway processes on one real PostgreSQL, talking to a scripted model: any
replica serves any session, one turn at a time per session, nothing acknowledged is lost when
a replica is killed."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx2
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ModelStall
from nodmix.testing.model_server import ScriptedModelServer
from tests.state.replicas import (
    chat,
    conversation,
    database_view,
    replicas_on_postgres,
)

pytestmark = pytest.mark.integration


def counting(request: ModelRequest) -> ModelReply:
    """Says how many user messages it was sent: the history the replica replayed."""
    users = [m for m in request.messages if m.role == "user"]
    return ModelReply.text(f"{users[-1].text} -> seen {len(users)}")


def test_alternate_turns_across_replicas_make_one_linear_transcript(
    tmp_path: Path, postgres_url: str
) -> None:
    with (
        ScriptedModelServer(counting) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as (a, b),
    ):
        replies = [chat((a, b)[i % 2], f"m{i}", "shared") for i in range(6)]
    assert replies == [f"m{i} -> seen {i + 1}" for i in range(6)]
    with database_view(postgres_url, tmp_path / "view") as view:
        talk = conversation(view, "agent:main:shared")
    assert talk == [
        item for i in range(6) for item in (("user", f"m{i}"), ("assistant", replies[i]))
    ]


def test_concurrent_turns_on_one_session_from_two_replicas_take_turns(
    tmp_path: Path, postgres_url: str
) -> None:
    first_in = threading.Event()
    release = threading.Event()

    async def slow_first(request: ModelRequest) -> ModelReply:
        import anyio

        users = [m for m in request.messages if m.role == "user"]
        if users[-1].text == "first":
            first_in.set()
            await anyio.to_thread.run_sync(release.wait, 30)
        return ModelReply.text(f"{users[-1].text} after {len(users) - 1}")

    with (
        ScriptedModelServer(slow_first) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as (a, b),
    ):
        results: dict[str, str] = {}
        one = threading.Thread(target=lambda: results.update(a=chat(a, "first", "busy")))
        one.start()
        assert first_in.wait(30)
        two = threading.Thread(target=lambda: results.update(b=chat(b, "second", "busy")))
        two.start()
        two.join(1.0)
        assert two.is_alive(), "the second turn must wait for the first"
        release.set()
        one.join(30)
        two.join(30)
    assert results == {"a": "first after 0", "b": "second after 1"}
    with database_view(postgres_url, tmp_path / "view") as view:
        talk = conversation(view, "agent:main:busy")
    assert [text for _, text in talk] == ["first", "first after 0", "second", "second after 1"]


def test_a_replica_killed_mid_turn_loses_no_acknowledged_reply(
    tmp_path: Path, postgres_url: str
) -> None:
    stalled = threading.Event()

    def respond(request: ModelRequest) -> ModelReply | ModelStall:
        users = [m for m in request.messages if m.role == "user"]
        if users[-1].text == "never answered":
            stalled.set()
            return ModelStall(mode="hang")
        return counting(request)

    with (
        ScriptedModelServer(respond) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as (a, b),
    ):
        assert chat(a, "hello", "s") == "hello -> seen 1"
        caller = threading.Thread(
            target=lambda: pytest.raises(httpx2.HTTPError, chat, a, "never answered", "s")
        )
        caller.start()
        assert stalled.wait(30)
        assert a.proc is not None
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(10)
        caller.join(30)
        # The other replica takes the session at once: the dead one's lock went with it.
        reply = chat(b, "still there?", "s", timeout=30)
    assert reply == "still there? -> seen 3"
    with database_view(postgres_url, tmp_path / "view") as view:
        talk = conversation(view, "agent:main:s")
    assert talk[:2] == [("user", "hello"), ("assistant", "hello -> seen 1")]
    assert ("user", "never answered") in talk
    assert talk[-2:] == [("user", "still there?"), ("assistant", reply)]
