"""A replica left running after a newer Nodmix migrated the schema: a real gateway on a real
PostgreSQL notices at its next heartbeat and refuses every further write with one line naming
both schema versions, and `nodmix status` shows it, instead of writing under a schema it does
not know."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import psycopg
import pytest

from nodmix.state.postgres.migrations import latest_version
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.gateway.support import run_nodmix
from tests.state.replicas import chat, replica_state, replicas

pytestmark = pytest.mark.integration


def _entries(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM nodmix_transcript_entries").fetchone()
    return int(row[0]) if row else 0


def test_a_running_replica_stops_writing_once_a_newer_nodmix_migrated(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(echo) as model:
        state = replica_state(tmp_path, "old", model.base_url, postgres_url)
        with replicas([state]) as (gateway,):
            assert chat(gateway, "before", "s")
            with psycopg.connect(postgres_url, autocommit=True) as conn:  # a newer Nodmix
                conn.execute(
                    "INSERT INTO nodmix_schema_version (version, name) VALUES (%s, 'future')",
                    (latest_version() + 1,),
                )
            deadline = time.monotonic() + 60  # a heartbeat is a third of leaseSeconds (2 s)
            while True:
                try:
                    chat(gateway, "after", "s")
                except httpx2.HTTPStatusError as refused:
                    failure = refused
                    break
                assert time.monotonic() < deadline, "the replica kept writing"
            assert failure.response.status_code == 503
            message = failure.response.json()["error"]["message"]
            new, old = latest_version() + 1, latest_version()
            assert f"schema version {new}" in message and f"schema version {old}" in message
            assert "\n" not in message and "upgrade Nodmix" in message
            written = _entries(postgres_url)  # a turn under way when it noticed may have
            with pytest.raises(httpx2.HTTPStatusError):  # written; nothing is written after
                chat(gateway, "later", "s")
            assert _entries(postgres_url) == written
            health = httpx2.get(f"{gateway.url}/health", timeout=10).json()
            assert health["status"] == "degraded" and health["state"] == message
            status = run_nodmix(state, "status")
            assert f"refusing writes: {message}" in status.stdout, status.stdout
