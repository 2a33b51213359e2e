"""A slow database beside real gateway replicas (a real PostgreSQL): while a statement of a
channel message, a cron job or a subagent waits on a lock another session holds (a VACUUM FULL,
a migration, an analytics query), the gateway keeps serving: `/health` answers at once, and
the waiting work finishes once the lock is gone."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import psycopg
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.state.postgres.backend import PostgresState
from nodmix.state.settings import StateSettings
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.gateway.support import GatewayProcess, run_nodmix
from tests.state.replicas import chat, conversation, database_view, replica_state, replicas
from tests.state.test_replica_singletons import echo
from tests.support.postgres import wait_for

pytestmark = pytest.mark.integration

SERVED_WITHIN_S = 3.0
"""How long `/health` may take while a statement waits (a frozen loop takes until the lock
is released: 20 s)."""


class Held:
    """A lock on tables held by another session until `release()` (at most 20 s)."""

    def __init__(self, db_url: str, tables: str, mode: str = "ACCESS EXCLUSIVE") -> None:
        self._statement = f"LOCK TABLE {tables} IN {mode} MODE"
        self._db_url = db_url
        self._release = threading.Event()
        self._locked = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        with psycopg.connect(self._db_url) as conn, conn.transaction():
            conn.execute(self._statement)
            self._locked.set()
            self._release.wait(20)

    def __enter__(self) -> Held:
        self._thread.start()
        assert self._locked.wait(10), "the lock was not taken"
        return self

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)

    def __exit__(self, *exc: object) -> None:
        self.release()


def waiting_on(db_url: str, table: str) -> bool:
    """Whether a Nodmix connection waits on a lock of `table` now."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE NOT l.granted AND l.relation = %s::regclass"
            " AND a.application_name LIKE 'nodmix%%'",
            (table,),
        ).fetchone()
    return bool(row and row[0])


def serves_while_waiting(
    gateway: GatewayProcess, db_url: str, table: str, *, for_s: float = 0.0
) -> None:
    """Once a statement waits on `table`, the gateway still answers `/health` at once (each
    time it is asked over the next `for_s` seconds)."""
    wait_for(lambda: waiting_on(db_url, table), timeout=30, what=f"a statement on {table}")
    until = time.monotonic() + for_s
    while True:
        started = time.monotonic()
        assert httpx2.get(f"{gateway.url}/health", timeout=30).status_code == 200
        took = time.monotonic() - started
        assert took < SERVED_WITHIN_S, f"the loop froze {took:.1f} s on a statement on {table}"
        if started >= until:
            return
        time.sleep(0.2)  # the sampling interval of an observation window, not a wait


@contextlib.contextmanager
def database(db_url: str, state: Path) -> Iterator[PostgresState]:
    """The deployment's database as a CLI on another machine opens it."""
    backend = PostgresState.open(StateSettings(backend="postgres", url=db_url), state, role="test")
    try:
        yield backend
    finally:
        backend.close()


def test_a_channel_message_waits_for_a_slow_database_without_freezing_the_gateway(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(echo) as model, ScriptedBotAPI() as api:
        telegram = {"botToken": api.token, "apiBaseUrl": api.url, "pollTimeoutSeconds": 1}
        state = replica_state(
            tmp_path, "r1", model.base_url, postgres_url, channels={"telegram": telegram}
        )
        with replicas([state]) as (gateway,):
            with database(postgres_url, tmp_path / "cli") as db:  # a paired sender
                pairing = db.provide("channels.pairing")
                request, _ = pairing.request("telegram", "77", chat_id="77")
                pairing.approve("telegram", request.code)
            api.inject_text(chat_id=77, sender_id=77, text="first")  # the channel runs
            api.wait_for(lambda: "echo first" in api.sent_texts(77), timeout=60)
            # The pairing check reads a document, accepting the message inserts it as
            # pending, answering it records its key: each waits in turn.
            with (
                Held(postgres_url, "nodmix_documents") as documents,
                Held(postgres_url, "nodmix_channel_pending") as pending,
                Held(postgres_url, "nodmix_channel_answered", "SHARE") as answered,
            ):
                api.inject_text(chat_id=77, sender_id=77, text="slow")
                serves_while_waiting(gateway, postgres_url, "nodmix_documents")
                documents.release()
                serves_while_waiting(gateway, postgres_url, "nodmix_channel_pending")
                pending.release()
                api.wait_for(lambda: "echo slow" in api.sent_texts(77), timeout=60)
                serves_while_waiting(gateway, postgres_url, "nodmix_channel_answered")
                answered.release()
            api.inject_text(chat_id=77, sender_id=77, text="after")
            api.wait_for(lambda: "echo after" in api.sent_texts(77), timeout=60)
        assert api.sent_texts(77).count("echo slow") == 1


def _ok_runs(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT record FROM nodmix_cron_runs").fetchall()
    return sum(b'"status":"ok"' in bytes(r[0]) for r in rows)


def test_cron_runs_wait_for_a_slow_database_without_freezing_the_gateway(
    tmp_path: Path, postgres_url: str
) -> None:
    asked, go = threading.Event(), threading.Event()

    def slow_echo(request: ModelRequest) -> ModelReply:
        asked.set()
        go.wait(30)
        return echo(request)

    with ScriptedModelServer(slow_echo) as model:
        state = replica_state(tmp_path, "r1", model.base_url, postgres_url)
        with replicas([state]) as (gateway,):
            added = run_nodmix(
                state, "cron", "add", "--name", "tick", "--every", "2s", "--message", "tick"
            )
            assert added.returncode == 0, added.stderr
            assert asked.wait(60), "no run started"
            # A run's end and the scheduler's next look read and write the jobs' documents.
            with Held(postgres_url, "nodmix_documents") as documents:
                go.set()
                serves_while_waiting(gateway, postgres_url, "nodmix_documents", for_s=5)
                documents.release()
            wait_for(lambda: _ok_runs(postgres_url) >= 2, timeout=60, what="runs")


class Gate:
    """A scripted model that holds the replies to texts starting with `held` until `go`."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.asked = threading.Event()
        self.go = threading.Event()

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        text = getattr(last, "text", "")
        if last.role == "toolResult":
            return ModelReply.text(f"spawned: {text[:200]}")
        if text == "spawn":
            return ModelReply.tool_call("sessions_spawn", {"task": "child work", "wait": True})
        if text.startswith(self.held):
            self.asked.set()
            self.go.wait(30)
        return ModelReply.text(f"echo {text}")


def test_a_subagent_ends_beside_a_slow_database_without_freezing_the_gateway(
    tmp_path: Path, postgres_url: str
) -> None:
    model = Gate("child work")
    with ScriptedModelServer(model) as server:
        state = replica_state(tmp_path, "r1", server.base_url, postgres_url)
        with replicas([state]) as (gateway,):
            replies: list[str] = []
            turn = threading.Thread(target=lambda: replies.append(chat(gateway, "spawn", "p")))
            turn.start()
            try:
                assert model.asked.wait(60), "the subagent's turn did not start"
                # Its end adds its usage to the requester's session (an index row).
                with Held(postgres_url, "nodmix_session_index") as index:
                    model.go.set()
                    serves_while_waiting(gateway, postgres_url, "nodmix_session_index", for_s=5)
                    index.release()
            finally:
                model.go.set()
                turn.join(60)
            assert replies and replies[0].startswith("spawned:"), replies
            assert "echo child work" in replies[0]


def test_a_job_posts_into_a_session_beside_a_slow_database_without_freezing_the_gateway(
    tmp_path: Path, postgres_url: str
) -> None:
    model = Gate("tick")
    with ScriptedModelServer(model) as server:
        state = replica_state(tmp_path, "r1", server.base_url, postgres_url)
        with replicas([state]) as (gateway,):
            assert chat(gateway, "hello", "inbox") == "echo hello"
            added = run_nodmix(
                state, "cron", "add", "--name", "tick", "--every", "2s", "--message", "tick",
                "--deliver", "session:inbox",
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
            assert model.asked.wait(60), "no run started"
            # The post appends to the session and writes its index row: reads still pass.
            with Held(postgres_url, "nodmix_session_index", "SHARE") as index:
                model.go.set()
                serves_while_waiting(gateway, postgres_url, "nodmix_session_index", for_s=5)
                index.release()
            with database_view(postgres_url, tmp_path / "view") as view:
                wait_for(
                    lambda: ("assistant", "echo tick") in conversation(view, "agent:main:inbox"),
                    timeout=60,
                    what="the job's post",
                )
