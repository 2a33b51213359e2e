"""`nodmix state migrate`: a state directory a real gateway filled on files moves into a real
PostgreSQL (resumably: killed halfway and run again) and every session stays readable and
continues there; and back to files."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.pairing import PairingStore
from nodmix.channels.whatsapp.window import FileWhatsAppStore
from nodmix.gateway.token import FileTokenStore
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.security.allowlist import Allowlist
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess, run_nodmix
from tests.state.replicas import chat, conversation, database_view, replica_state, replicas
from tests.support.config import write_json_config

pytestmark = pytest.mark.integration


def counting(request: ModelRequest) -> ModelReply:
    users = [m for m in request.messages if m.role == "user"]
    return ModelReply.text(f"{users[-1].text} -> seen {len(users)}")


def _populate(state: Path, model_url: str) -> None:
    write_json_config(state, model_url, gateway={"auth": {"token": "test-token-0123"}})
    with GatewayProcess(state) as gateway:
        for i in range(3):
            chat(gateway, f"a{i}", "alpha")
        chat(gateway, "b0", "beta")
    added = run_nodmix(state, "cron", "add", "--name", "nightly", "--every", "1d", "--message", "x")
    assert added.returncode == 0, added.stderr
    pairing = PairingStore(state)
    request, _ = pairing.request("telegram", "77")
    assert request is not None
    pairing.approve("telegram", request.code)
    Allowlist(state).add("git status")
    FileTokenStore(state).load_or_create()  # as a gateway with no token configured made it
    handled = FileWhatsAppStore(DeliveryLog(state, "whatsapp"))
    for n in range(2):
        handled.remember(f"wamid.{n}", time.time())


def test_a_populated_state_dir_moves_into_postgres_resumably_and_every_session_continues(
    tmp_path: Path, isolated_state: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(counting) as model:
        _populate(isolated_state, model.base_url)
        migrate = ("state", "migrate", "--to", "postgres", "--url", postgres_url, "--json")
        killed = run_nodmix(
            isolated_state, *migrate, env={"NODMIX_CRASH_AT": "state.migrate.transcript@1"}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        done = run_nodmix(isolated_state, *migrate)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["ok"] and not report["conflicts"]
        assert report["copied"]["gateway token"] == 1
        assert report["copied"]["channel records"] == 2  # WhatsApp's handled ids
        assert report["copied"]["transcripts"] == 1  # the other one was copied before the kill
        again = json.loads(run_nodmix(isolated_state, *migrate).stdout)
        assert again["ok"] and "transcript lines" not in again["copied"]

        replica = replica_state(tmp_path, "r1", model.base_url, postgres_url)
        listed = run_nodmix(replica, "sessions", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        counts = {row["key"]: row["messages"] for row in json.loads(listed.stdout)}
        assert counts == {"agent:main:alpha": 6, "agent:main:beta": 2}  # as on files
        shown = run_nodmix(replica, "sessions", "show", "alpha")
        assert shown.returncode == 0, shown.stderr
        assert "a2" in shown.stdout and "a2 -> seen 3" in shown.stdout
        assert "\nfile    in the state database\n" in shown.stdout  # no path to a file not there
        jobs = json.loads(run_nodmix(replica, "cron", "list", "--json").stdout)["jobs"]
        assert [j["name"] for j in jobs] == ["nightly"]
        pairs = run_nodmix(replica, "pairing", "list", "telegram", "--json")
        assert "77" in pairs.stdout
        with replicas([replica]) as (gateway,):
            assert chat(gateway, "a3", "alpha") == "a3 -> seen 4"
        with database_view(postgres_url, tmp_path / "view") as view:
            assert [t for _, t in conversation(view, "agent:main:alpha")][-2:] == [
                "a3",
                "a3 -> seen 4",
            ]

        back = tmp_path / "back"
        back.mkdir()
        write_json_config(back, model.base_url, gateway={"auth": {"token": "test-token-0123"}})
        returned = run_nodmix(back, "state", "migrate", "--to", "files", "--url", postgres_url)
        assert returned.returncode == 0, returned.stderr
        assert FileTokenStore(back).load() == FileTokenStore(isolated_state).load()
        assert FileWhatsAppStore(DeliveryLog(back, "whatsapp")).handled("wamid.1")
        with GatewayProcess(back) as gateway:
            assert chat(gateway, "a4", "alpha") == "a4 -> seen 5"


def test_a_round_trip_back_to_the_original_dir_updates_it_and_never_splices_histories(
    tmp_path: Path, isolated_state: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(counting) as model:
        _populate(isolated_state, model.base_url)
        to_pg = run_nodmix(
            isolated_state, "state", "migrate", "--to", "postgres", "--url", postgres_url
        )
        assert to_pg.returncode == 0, to_pg.stderr
        replica = replica_state(tmp_path, "r1", model.base_url, postgres_url)
        with replicas([replica]) as (gateway,):
            assert chat(gateway, "a3", "alpha") == "a3 -> seen 4"
            assert chat(gateway, "pg only", "beta") == "pg only -> seen 2"
        with GatewayProcess(isolated_state) as old:  # someone kept using the file state too
            assert chat(old, "files only", "beta") == "files only -> seen 2"

        back = ("state", "migrate", "--to", "files", "--url", postgres_url, "--json")
        report = json.loads(run_nodmix(isolated_state, *back).stdout)
        assert report["ok"], report
        assert report["copied"]["index entries updated"] == 1  # alpha, further along in the db
        assert [c for c in report["conflicts"] if "alpha" in c] == []
        assert any("went on differently" in c for c in report["conflicts"])
        listed = json.loads(run_nodmix(isolated_state, "sessions", "list", "--json").stdout)
        counts = {row["key"]: row["messages"] for row in listed}
        assert counts == {"agent:main:alpha": 8, "agent:main:beta": 4}
        with GatewayProcess(isolated_state) as gateway:
            assert chat(gateway, "a4", "alpha") == "a4 -> seen 5"
            assert chat(gateway, "b2", "beta") == "b2 -> seen 3"  # its own history, unspliced
        shown = run_nodmix(isolated_state, "sessions", "show", "beta").stdout
        assert "files only" in shown and "pg only" not in shown

        again = run_nodmix(
            isolated_state, "state", "migrate", "--to", "postgres", "--url", postgres_url
        )
        assert again.returncode == 0, again.stderr
        assert "went on differently" in again.stdout and "conflict(s) above" in again.stdout
        with database_view(postgres_url, tmp_path / "view") as view:
            texts = [t for _, t in conversation(view, "agent:main:beta")]  # still linear
        assert "pg only" in texts and "files only" not in texts and "b2" not in texts
