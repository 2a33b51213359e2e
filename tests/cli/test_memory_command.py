"""`nodmix memory status|index|search` as a user runs them: real subprocesses, real files."""

from __future__ import annotations

import json
from pathlib import Path

from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.memory.support import write_notes
from tests.support.cli import run_nodmix


def test_index_status_and_search_in_keyword_mode(isolated_state: Path) -> None:
    write_notes(isolated_state / "workspace")
    index = run_nodmix(isolated_state, "memory", "index", "--json")
    assert index.returncode == 0, index.stderr
    assert json.loads(index.stdout)["indexed"] == 4
    status = json.loads(run_nodmix(isolated_state, "memory", "status", "--json").stdout)
    assert (status["mode"], status["files"], status["chunks"]) == ("keyword", 4, 5)
    found = run_nodmix(isolated_state, "memory", "search", "who booked the dentist?", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert (hits[0]["path"], hits[0]["startLine"], hits[0]["endLine"]) == (
        "memory/2026-11-18.md",
        1,
        5,
    )
    text = run_nodmix(isolated_state, "memory", "search", "lisbon")
    assert "memory/2026-11-20.md:1-4" in text.stdout
    again = json.loads(run_nodmix(isolated_state, "memory", "index", "--json").stdout)
    assert again["indexed"] == 0
    forced = json.loads(run_nodmix(isolated_state, "memory", "index", "--force", "--json").stdout)
    assert forced["indexed"] == 4


def test_hybrid_search_from_the_command_line_with_scripted_embeddings(
    isolated_state: Path,
) -> None:
    write_notes(isolated_state / "workspace")
    with ScriptedModelServer(lambda r: ModelReply.text("x")) as server:
        config = {"memory": {"embeddings": {"baseUrl": server.base_url, "model": "emb"}}}
        (isolated_state / "nodmix.json").write_text(json.dumps(config))
        found = run_nodmix(isolated_state, "memory", "search", "orthodontist checkup", "--json")
        status = json.loads(run_nodmix(isolated_state, "memory", "status", "--json").stdout)
    assert json.loads(found.stdout)[0]["path"] == "memory/2026-11-18.md"
    assert (status["mode"], status["embeddingModel"], status["embeddings"]) == ("hybrid", "emb", 5)


def test_mistakes_get_one_line_and_a_non_zero_exit(isolated_state: Path) -> None:
    unknown = run_nodmix(isolated_state, "memory", "search", "x", "--agent", "nobody")
    assert unknown.returncode != 0
    assert "no agent 'nobody'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    wanted = {"--max-results": "a whole number of 1 or more", "--min-score": "a score from 0 to 1"}
    for option, value in (("--max-results", "0"), ("--max-results", "-3"), ("--min-score", "2")):
        bad = run_nodmix(isolated_state, "memory", "search", "x", option, value)
        assert bad.returncode == 2
        last = bad.stderr.strip().splitlines()[-1]
        assert last.endswith(f"argument {option}: expected {wanted[option]}, got '{value}'")
    (isolated_state / "nodmix.json").write_text('{"memory": {"embedings": {}}}')
    typo = run_nodmix(isolated_state, "memory", "status")
    assert typo.returncode != 0
    assert "memory.embedings" in typo.stderr and len(typo.stderr.strip().splitlines()) == 1
    config = {"memory": {"embeddings": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"}}}
    (isolated_state / "nodmix.json").write_text(json.dumps(config))
    write_notes(isolated_state / "workspace")
    down = run_nodmix(isolated_state, "memory", "index")
    assert down.returncode == 1
    assert "embeddings failed (keyword search still works)" in down.stderr
    search = run_nodmix(isolated_state, "memory", "search", "lentils")
    assert "keyword results only" in search.stderr and "memory/2026-11-18.md" in search.stdout
