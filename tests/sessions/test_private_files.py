"""Conversations and config are private: the state dir and its folders are 0700, its files 0600.

Checked under a umask of 0 (the most permissive a user could have), as a user would produce
the files: `nodmix config set` in a state directory that does not exist yet, then turns
through the runtime against a scripted model server.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.config.loader import load_config
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.anyio
async def test_state_dir_config_store_journal_and_transcripts_are_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None
) -> None:
    state = tmp_path / "new-state"
    monkeypatch.setenv("NODMIX_STATE_DIR", str(state))
    monkeypatch.setenv("NODMIX_CONFIG_PATH", str(state / "nodmix.json"))
    with ScriptedModelServer(echo) as server:
        provider = (
            f"{{api:'openai-completions',baseUrl:'{server.base_url}',apiKey:'sk-x',"
            "models:[{id:'scripted'}]}"
        )
        assert main(["config", "set", "models.providers.local", provider]) == 0
        assert main(["config", "set", "agents.defaults.model.primary", "local/scripted"]) == 0
        assert _mode(state) == 0o700
        assert _mode(state / "nodmix.json") == 0o600
        env = dict(os.environ)
        async with Runtime.open(load_config(env=env), env=env) as runtime:
            for name in ("one", "two", "three"):
                outcome = await runtime.run_turn(f"hi {name}", session_key=name)
                assert outcome.result.reply == f"hi {name}"
            sessions = state / "agents" / "main" / "sessions"
            journal = sessions / "sessions.json.journal"
            assert journal.exists() and _mode(journal) == 0o600
    folders = [p for p in state.rglob("*") if p.is_dir()]
    assert {state / "agents", state / "agents" / "main", state / "workspace", sessions} <= set(
        folders
    )
    assert {p.name: _mode(p) for p in folders} == {p.name: 0o700 for p in folders}
    private = [
        sessions / "sessions.json",
        *sessions.glob("*.jsonl"),
        *(sessions / "locks").iterdir(),
    ]
    assert len(private) == 1 + 3 + 3
    assert {p.name: _mode(p) for p in private} == {p.name: 0o600 for p in private}
