"""A bad day for replicas on a real PostgreSQL: the database restarted under load, and the
database gone for 20 seconds (a network partition) while two gateways keep serving."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx2
import psycopg
import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess
from tests.state.replicas import (
    chat,
    conversation,
    database_view,
    replica_state,
    replicas,
    replicas_on_postgres,
)
from tests.state.test_replicas import counting
from tests.support.postgres import PostgresServer, wait_for

pytestmark = pytest.mark.integration


def _load(
    gateways: list,
    stop: threading.Event,
    ok: dict[str, list[str]],
    failed: list[tuple[int, float, str]],
    served: list[tuple[int, float]],
) -> None:
    """Turns one after another across the gateways: acknowledged texts per session in `ok`,
    and each turn's gateway and end time in `failed` or `served`."""
    i = 0
    while not stop.is_set():
        session = f"s{i % 4}"
        text = f"t{i}"
        g = i % len(gateways)
        try:
            chat(gateways[g], text, session, timeout=30)
            ok.setdefault(session, []).append(text)
            served.append((g, time.monotonic()))
        except httpx2.HTTPError as exc:
            failed.append((g, time.monotonic(), f"{text}: {exc}"))
        i += 1


def test_a_database_restart_under_load_loses_no_acknowledged_turn(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str
) -> None:
    ok: dict[str, list[str]] = {}
    failed: list[tuple[int, float, str]] = []
    served: list[tuple[int, float]] = []
    stop = threading.Event()
    with (
        ScriptedModelServer(counting) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as gateways,
    ):
        worker = threading.Thread(target=_load, args=(gateways, stop, ok, failed, served))
        worker.start()
        try:
            wait_for(lambda: sum(map(len, ok.values())) >= 20, what="turns before")
            postgres_server.restart("fast")
            restarted = time.monotonic()
            before = sum(map(len, ok.values()))
            wait_for(lambda: sum(map(len, ok.values())) >= before + 20, what="turns after")
        finally:
            stop.set()
            worker.join(60)
        assert chat(gateways[0], "after", "s0").startswith("after -> seen")
    # Only turns caught by the restart fail: once a replica has served a turn again, none of
    # its later turns fails (how many fail before depends on how fast the restart is).
    for g in range(2):
        back = min(t for gw, t in served if gw == g and t > restarted)
        late = [what for gw, t, what in failed if gw == g and t > back]
        assert not late, f"replica {g + 1} failed turns after it served again: {late}"
    with database_view(postgres_url, tmp_path / "view") as view:
        for session, texts in ok.items():
            said = [t for role, t in conversation(view, f"agent:main:{session}") if role == "user"]
            missing = [t for t in texts if t not in said]
            assert not missing, f"{session}: acknowledged turns lost: {missing}"


def test_twenty_seconds_without_the_database_fail_turns_fast_and_recover_alone(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str
) -> None:
    with (
        ScriptedModelServer(counting) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as (a, b),
    ):
        assert chat(a, "before", "p") == "before -> seen 1"
        postgres_server.stop("immediate")
        try:
            gone = time.monotonic()
            started = time.monotonic()
            response = httpx2.get(f"{a.url}/health", timeout=5)
            assert response.status_code == 200 and time.monotonic() - started < 2
            started = time.monotonic()
            with pytest.raises(httpx2.HTTPStatusError) as failure:
                chat(b, "during", "p", timeout=30)
            assert time.monotonic() - started < 10
            assert failure.value.response.status_code == 503
            message = failure.value.response.json()["error"]["message"]
            assert "state database" in message and "\n" not in message  # one line
            spent = _cpu_seconds(a) + _cpu_seconds(b)
            while time.monotonic() - gone < 20:  # the partition lasts 20 s
                assert httpx2.get(f"{b.url}/health", timeout=5).status_code == 200
                time.sleep(1)
            # Waiting for the database is not a busy loop (idle, the pair uses ~0.1 s).
            assert _cpu_seconds(a) + _cpu_seconds(b) - spent < 8
        finally:
            postgres_server.start()
        wait_for(lambda: _answers(a, "again"), timeout=30, what="replica a back")
        wait_for(lambda: _answers(b, "again b"), timeout=30, what="replica b back")
        wait_for(
            lambda: _holders(postgres_url) >= {"cron", "heartbeat"},
            timeout=30,
            what="singletons taken again",
        )
    with database_view(postgres_url, tmp_path / "view") as view:
        said = [t for role, t in conversation(view, "agent:main:p") if role == "user"]
    assert said[0] == "before" and "again" in said and "again b" in said


def _cpu_seconds(gateway: GatewayProcess) -> float:
    """User and system CPU time the gateway process has used so far."""
    assert gateway.proc is not None
    fields = Path(f"/proc/{gateway.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _answers(gateway: object, text: str) -> bool:
    try:
        return chat(gateway, text, "p", timeout=10).startswith(text)  # type: ignore[arg-type]
    except httpx2.HTTPError:
        return False


def _holders(db_url: str) -> set[str]:
    import psycopg

    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT name FROM nodmix_leases WHERE expires_at > now()").fetchall()
    return {str(r[0]) for r in rows}


def test_replicas_with_different_configs_still_run_each_singleton_once(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(counting) as model:
        short = replica_state(tmp_path, "short", model.base_url, postgres_url)
        long = replica_state(
            tmp_path, "long", model.base_url, postgres_url, state={"postgres": {"leaseSeconds": 30}}
        )
        with replicas([short, long]) as (a, b):
            assert chat(b, "hi", "mixed") == "hi -> seen 1"
            assert chat(a, "again", "mixed") == "again -> seen 2"
            wait_for(lambda: _holders(postgres_url) >= {"cron", "heartbeat"}, what="holders")


def test_a_slow_database_delays_its_turns_but_never_freezes_the_gateway(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(counting) as model:
        state = replica_state(tmp_path, "r1", model.base_url, postgres_url)
        with replicas([state]) as (gateway,):
            assert chat(gateway, "before", "slow") == "before -> seen 1"
            release = threading.Event()
            locked = threading.Event()

            def hold_locks() -> None:  # a VACUUM FULL, a migration, an analytics query
                with psycopg.connect(postgres_url) as conn, conn.transaction():
                    conn.execute("LOCK TABLE nodmix_session_index, nodmix_transcript_entries")
                    locked.set()
                    release.wait(20)

            holder = threading.Thread(target=hold_locks, daemon=True)
            holder.start()
            turn = threading.Thread(target=lambda: chat(gateway, "during", "slow"), daemon=True)
            try:
                assert locked.wait(10)
                turn.start()
                wait_for(lambda: _waiting_on_a_lock(postgres_url), what="the turn's statement")
                started = time.monotonic()
                assert httpx2.get(f"{gateway.url}/health", timeout=30).status_code == 200
                assert time.monotonic() - started < 3
            finally:
                release.set()
                holder.join(10)
                turn.join(60)


def _waiting_on_a_lock(db_url: str) -> bool:
    """Whether a Nodmix connection waits on a lock now."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name LIKE 'nodmix%%' AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])
