"""Events between two processes of one real PostgreSQL: a payload too large for one NOTIFY
(a hostile sender's huge message, a long tool result) reaches the other process whole and in
order with the small ones around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.state.postgres.backend import PostgresState
from tests.gateway.support import poll_until
from tests.state.conftest import pg_settings

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_a_payload_larger_than_a_notify_arrives_whole_and_in_order(
    tmp_path: Path, postgres_url: str
) -> None:
    sender = PostgresState.open(pg_settings(postgres_url), tmp_path / "a", role="test")
    receiver = PostgresState.open(pg_settings(postgres_url), tmp_path / "b", role="test")
    heard: list[tuple[str, dict[str, Any]]] = []
    receiver.pg.listen(lambda topic, payload: heard.append((topic, payload)))
    huge = "ünïcode " * 200_000  # 1.8 MB of UTF-8, far above NOTIFY's 8000-byte limit
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(sender.pg.serve)
            group.start_soon(receiver.pg.serve)

            async def listening() -> bool:
                return receiver.pg.listening

            await poll_until(listening, what="the LISTEN connection", timeout=30)
            sender.pg.publish("ws.test", {"n": 1})
            sender.pg.publish("ws.test", {"n": 2, "text": huge})
            sender.pg.publish("ws.test", {"n": 3})

            async def all_heard() -> bool:
                return len(heard) >= 3

            await poll_until(all_heard, what="three events", timeout=30)
            group.cancel_scope.cancel()
    finally:
        sender.close()
        receiver.close()
    assert [p["n"] for _, p in heard] == [1, 2, 3]
    assert heard[1][1]["text"] == huge
