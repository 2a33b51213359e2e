"""The Mattermost read-back after a reconnect is bounded: the newest posts per channel, none
older than a day, nothing on the first start; the real client against the scripted server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.channels.mattermost import backlog as backlog_module
from nodmix.channels.mattermost.adapter import MattermostAdapter, MattermostSettings
from nodmix.channels.mattermost.backlog import MAX_PER_CHANNEL, Backlog
from nodmix.testing.mattermost_server import ScriptedMattermost

ANN = "ann00000000000000000000000"
TOWN = "town0000000000000000000000"


@pytest.fixture
def mm() -> Iterator[ScriptedMattermost]:
    with ScriptedMattermost() as server:
        server.add_user(ANN, "ann")
        yield server


def _missed(mm: ScriptedMattermost, backlog: Backlog, state: Path) -> list[tuple[str, Any]]:
    adapter = MattermostAdapter(
        MattermostSettings(scheme="http", host=mm.host, port=mm.port, token=mm.token), state
    )

    async def read() -> list[tuple[str, Any]]:
        try:
            return [(kind, post["message"]) async for kind, post in backlog.missed(adapter.api)]
        finally:
            await adapter.aclose()

    return anyio.run(read)


def test_the_first_start_reads_nothing_back(mm: ScriptedMattermost, tmp_path: Path) -> None:
    mm.inject_post(TOWN, ANN, "old news")
    assert _missed(mm, Backlog(tmp_path, "mattermost"), tmp_path) == []
    assert mm.reads_since == []


def test_only_the_newest_posts_after_the_mark_are_read_back_oldest_first(
    mm: ScriptedMattermost, tmp_path: Path
) -> None:
    backlog = Backlog(tmp_path, "mattermost")
    mm.inject_post(TOWN, ANN, "handled")
    handled = mm.stored[-1]
    handled["create_at"] = handled["update_at"] = handled["create_at"] - 10
    backlog.mark(TOWN, handled["create_at"])
    for i in range(MAX_PER_CHANNEL + 20):
        mm.inject_post(TOWN, ANN, f"missed {i}")
    found = _missed(mm, Backlog(tmp_path, "mattermost"), tmp_path)  # as after a restart
    assert [text for _, text in found] == [f"missed {i}" for i in range(20, MAX_PER_CHANNEL + 20)]
    assert {kind for kind, _ in found} == {"O"}


def test_posts_older_than_the_age_bound_are_not_read_back(
    mm: ScriptedMattermost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backlog = Backlog(tmp_path, "mattermost")
    backlog.mark(TOWN, 1)  # handled a post long ago
    mm.inject_post(TOWN, ANN, "a week ago")
    mm.stored[-1]["create_at"] = mm.stored[-1]["update_at"] = (
        int(time.time() * 1000) - 7 * 86_400_000
    )
    mm.inject_post(TOWN, ANN, "today")
    assert [text for _, text in _missed(mm, backlog, tmp_path)] == ["today"]
    floor = (time.time() - backlog_module.MAX_AGE_SECONDS) * 1000
    assert mm.reads_since and all(since >= floor - 5000 for _, since in mm.reads_since)
