"""Hybrid search with vectors from a real `/v1/embeddings` socket (the scripted server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.memory.support import make_index, write_notes

PARAPHRASE = "orthodontist checkup"
"""Shares no word with the dentist note (nor a stem: keyword search cannot find it)."""


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda request: ModelReply.text("unused")) as running:
        yield running


@pytest.fixture
def workspace(isolated_state: Path) -> Path:
    ws = isolated_state / "workspace"
    write_notes(ws)
    return ws


def test_a_paraphrase_sharing_no_word_finds_the_note_only_with_vectors(
    isolated_state: Path, workspace: Path, server: ScriptedModelServer
) -> None:
    keyword = make_index(isolated_state / "k", workspace)
    assert keyword.search(PARAPHRASE) == []
    keyword.close()
    hybrid = make_index(isolated_state / "h", workspace, embeddings_url=server.base_url)
    hits = hybrid.search(PARAPHRASE)
    assert hits[0].path == "memory/2026-11-18.md"
    assert (hits[0].start_line, hits[0].end_line) == (1, 5)
    assert hybrid.search("nut intolerance")[0].path == "MEMORY.md"
    assert hybrid.search("which airport does my plane depart from")[0].path == (
        "memory/2026-11-20.md"
    )
    assert hybrid.status()["mode"] == "hybrid"
    hybrid.close()


def test_an_unchanged_chunk_is_never_embedded_twice(
    isolated_state: Path, workspace: Path, server: ScriptedModelServer
) -> None:
    index = make_index(isolated_state, workspace, embeddings_url=server.base_url)
    first = index.sync()
    assert first.embedded == index.status()["chunks"] == 5
    embedded = sum(len(r["input"]) for r in server.embedding_requests)
    assert index.sync(force=True).embedded == 0  # re-chunked, same content: cached vectors
    note = workspace / "memory/2026-11-19.md"
    note.write_text(note.read_text() + "\nNew tyres too.\n")
    assert index.sync().embedded == 1
    # Renaming keeps the content, so its vector is reused as well.
    note.rename(workspace / "memory/car.md")
    assert index.sync().embedded == 0
    assert sum(len(r["input"]) for r in server.embedding_requests) == embedded + 1
    assert {r["model"] for r in server.embedding_requests} == {"scripted-embeddings"}
    index.close()


def test_a_failing_embeddings_endpoint_falls_back_to_keywords(
    isolated_state: Path, workspace: Path
) -> None:
    with ScriptedModelServer(lambda r: ModelReply.text("x"), api_key="right") as server:
        index = make_index(isolated_state, workspace, embeddings_url=server.base_url)
        hits = index.search("dentist appointment")
    assert hits[0].path == "memory/2026-11-18.md"
    assert index.embedding_error is not None and "401" in index.embedding_error
    assert index.status()["embeddings"] == 0
    index.close()


def test_unused_cached_vectors_are_dropped_once_past_the_slack(
    isolated_state: Path, workspace: Path, server: ScriptedModelServer
) -> None:
    index = make_index(isolated_state, workspace, embeddings_url=server.base_url)
    index.sync()
    note = workspace / "memory/2026-11-19.md"
    for n in range(3):
        note.write_text(f"# Car\nVisit {n} to the garage.\n")
        index.sync()
    assert index.status()["embeddings"] == 5 + 3  # old versions kept: within the slack
    index.embedding_slack = 0
    note.write_text("# Car\nSold it.\n")
    index.sync()
    assert index.status()["embeddings"] == index.status()["chunks"] == 5
    index.close()
