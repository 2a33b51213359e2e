"""The scripted server's `/v1/embeddings`: deterministic test-double vectors over HTTP."""

from __future__ import annotations

import math

import httpx2
import pytest

from nodmix.providers.fake import ModelReply
from nodmix.testing.embeddings import DIMENSIONS, embed
from nodmix.testing.model_server import ScriptedModelServer


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_paraphrases_point_the_same_way_and_unrelated_texts_do_not() -> None:
    note = embed("Booked a dentist appointment for Thursday")
    assert len(note) == DIMENSIONS
    assert math.isclose(sum(x * x for x in note), 1.0, rel_tol=1e-9)
    assert _cosine(note, embed("orthodontist checkup")) > 0.5
    assert _cosine(note, embed("flight to Lisbon")) < 0.2
    assert embed("...") == [0.0] * DIMENSIONS


@pytest.mark.anyio
async def test_the_server_embeds_a_batch_in_order_and_records_it() -> None:
    async with (
        ScriptedModelServer(lambda r: ModelReply.text("x"), api_key="k") as server,
        httpx2.AsyncClient(timeout=10) as client,
    ):
        url = f"{server.base_url}/embeddings"
        denied = await client.post(url, json={"input": "x"})
        auth = {"Authorization": "Bearer k"}
        bad = await client.post(url, json={"input": [1, 2]}, headers=auth)
        ok = await client.post(url, json={"model": "m", "input": ["dentist", "car"]}, headers=auth)
    assert denied.status_code == 401
    assert bad.status_code == 400
    body = ok.json()
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert body["data"][0]["embedding"] == embed("dentist")
    assert body["data"][1]["embedding"] == embed("car")
    assert body["model"] == "m"
    assert server.embedding_requests == [{"model": "m", "input": ["dentist", "car"]}]
    assert server.requests == []  # model requests are kept apart
