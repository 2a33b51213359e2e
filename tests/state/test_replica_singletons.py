"""Singletons across real gateway replicas on one real PostgreSQL: a cron job fires once per
slot whichever replica runs the scheduler (and keeps firing after that replica is killed),
one Telegram bot is polled by one replica at a time, and one Mattermost bot holds one socket."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.gateway.support import GatewayProcess, run_nodmix
from tests.state.replicas import chat, replicas_on_postgres
from tests.support.postgres import wait_for

pytestmark = pytest.mark.integration


def echo(request: ModelRequest) -> ModelReply:
    users = [m for m in request.messages if m.role == "user"]
    return ModelReply.text(f"echo {users[-1].text}")


def _holder(db_url: str, name: str) -> str | None:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT holder FROM nodmix_leases WHERE name = %s AND expires_at > now()", (name,)
        ).fetchone()
    return str(row[0]) if row else None


def _process_of(holder: str, gateways: list[GatewayProcess]) -> GatewayProcess:
    pid = int(holder.split(":")[1])
    return next(g for g in gateways if g.proc is not None and g.proc.pid == pid)


def _holder_and_other(
    db_url: str, name: str, gateways: list[GatewayProcess]
) -> tuple[str, GatewayProcess, GatewayProcess]:
    """The lease `name`'s holder, its replica and the other one of two replicas."""
    holder = _holder(db_url, name)
    assert holder is not None
    holding = _process_of(holder, gateways)
    other = next(g for g in gateways if g is not holding)
    assert holding.proc is not None and other.proc is not None
    return holder, holding, other


def _kill(gateway: GatewayProcess) -> None:
    """Kill a replica the hard way (`kill -9`) and reap it."""
    assert gateway.proc is not None
    gateway.proc.send_signal(signal.SIGKILL)
    gateway.proc.wait(10)


def _telegram_replicas(
    tmp_path: Path, model_url: str, api: ScriptedBotAPI, db_url: str, lease_seconds: int
) -> contextlib.AbstractContextManager[list[GatewayProcess]]:
    """Two replicas polling one Telegram bot, under a lease of `lease_seconds`."""
    telegram = {
        "botToken": api.token,
        "apiBaseUrl": api.url,
        "pollTimeoutSeconds": 1,
        "allowFrom": ["42"],
    }
    return replicas_on_postgres(
        tmp_path,
        model_url,
        db_url,
        channels={"telegram": telegram},
        state={"postgres": {"leaseSeconds": lease_seconds}},
    )


def _runs(db_url: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT record FROM nodmix_cron_runs ORDER BY started_at").fetchall()
    return [json.loads(bytes(r[0])) for r in rows]


def test_a_cron_job_fires_once_per_slot_across_three_replicas_and_survives_its_holder(
    tmp_path: Path, postgres_url: str
) -> None:
    with (
        ScriptedModelServer(echo) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url, count=3) as gateways,
    ):
        added = run_nodmix(
            gateways[0].state,
            "cron",
            "add",
            "--name",
            "tick",
            "--every",
            "2s",
            "--message",
            "tick",
        )
        assert added.returncode == 0, added.stderr
        wait_for(
            lambda: sum(r.get("status") == "ok" for r in _runs(postgres_url)) >= 3,
            timeout=30,
            what="three runs",
        )
        holder = _holder(postgres_url, "cron")
        assert holder is not None
        _kill(_process_of(holder, gateways))
        killed_at = time.time()
        wait_for(
            lambda: (
                sum(
                    r.get("status") == "ok" and r["startedAt"] > killed_at
                    for r in _runs(postgres_url)
                )
                >= 3
            ),
            timeout=40,
            what="three runs after the holder was killed",
        )
        successor = _holder(postgres_url, "cron")
        assert successor is not None and successor != holder
    runs = _runs(postgres_url)
    slots = [r["slot"] for r in runs if r["trigger"] in ("schedule", "missed")]
    assert len(slots) == len(set(slots)), "a slot fired twice"
    ticks = [r for r in model.requests if r.request.messages[-1].text == "tick"]
    retried = [r for r in runs if r["trigger"] == "retry"]
    assert len(ticks) == len(slots) + len(retried)


def _local_ports(pid: int, port: int) -> set[int]:
    """Local ports of process `pid`'s established TCP connections to 127.0.0.1:`port`."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:
                ports.add(int(local.split(":")[1], 16))
    return ports


def _pollers(
    api: ScriptedBotAPI, gateways: list[GatewayProcess], port: int, seconds: float = 3.0
) -> Counter[int]:
    """getUpdates calls made over `seconds`, by the gateway whose connection made each (its
    sockets are sampled meanwhile: a long poll holds its connection, kept alive between polls).
    Other calls (a reply sent, the bot's own profile) may come from any replica."""
    first = len(api.calls)
    owners: dict[int, int] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for gateway in gateways:
            proc = gateway.proc
            if proc is not None and proc.poll() is None:
                owners.update(dict.fromkeys(_local_ports(proc.pid, port), proc.pid))
        time.sleep(0.02)  # the sampling interval of an observation window, not a wait
    polls: Counter[int] = Counter()
    for call in api.calls[first:]:
        if call.method == "getUpdates" and call.peer is not None:
            polls[owners.get(int(call.peer.rsplit(":", 1)[1]), 0)] += 1
    return polls


def test_one_telegram_bot_is_polled_by_one_replica_at_a_time(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(echo) as model, ScriptedBotAPI() as api:
        # a lease a loaded machine does not lose to one late renewal
        port = int(api.url.rsplit(":", 1)[1].split("/")[0])
        with _telegram_replicas(tmp_path, model.base_url, api, postgres_url, 5) as gateways:
            api.inject_text(chat_id=42, sender_id=42, text="one")
            api.wait_for(lambda: "echo one" in api.sent_texts(42), timeout=30)
            holder, poller, other = _holder_and_other(postgres_url, "channel:telegram", gateways)
            assert poller.proc is not None and other.proc is not None
            polls = _pollers(api, gateways, port)
            assert set(polls) == {poller.proc.pid}, polls

            _kill(poller)
            api.inject_text(chat_id=42, sender_id=42, text="two")
            api.wait_for(lambda: "echo two" in api.sent_texts(42), timeout=30)
            assert _holder(postgres_url, "channel:telegram") not in (None, holder)
            polls = _pollers(api, gateways, port)
            assert set(polls) == {other.proc.pid}, polls
        assert api.sent_texts(42).count("echo one") == 1
        assert api.sent_texts(42).count("echo two") == 1


def test_status_shows_the_backend_its_replicas_and_who_holds_each_singleton(
    tmp_path: Path, postgres_url: str
) -> None:
    with (
        ScriptedModelServer(echo) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url) as gateways,
    ):
        chat(gateways[0], "hello", "one")
        chat(gateways[1], "hello", "two")
        wait_for(
            lambda: _holder(postgres_url, "cron") and _holder(postgres_url, "heartbeat"),
            what="the singletons taken",
        )
        done = run_nodmix(gateways[1].state, "status", "--json", "--no-probe")
        assert done.returncode == 0, done.stderr
        state = json.loads(done.stdout)["state"]
        assert json.loads(done.stdout)["sessions"] == {"main": 2}  # from the database
        text = run_nodmix(gateways[1].state, "status", "--no-probe")
        assert text.returncode == 0, text.stderr
    assert state["backend"] == "postgres" and "password" not in json.dumps(state)
    assert state["schemaVersion"] >= 1 and state["leaseSeconds"] == 2
    pids = {g.proc.pid for g in gateways if g.proc is not None}
    assert {r["pid"] for r in state["replicas"]} >= pids
    held = {lease["name"]: lease for lease in state["singletons"] if lease["live"]}
    assert {"cron", "heartbeat"} <= set(held)
    replica_ids = {r["id"] for r in state["replicas"]}
    assert {held["cron"]["holder"], held["heartbeat"]["holder"]} <= replica_ids
    assert "state:     postgres" in text.stdout
    assert "sessions:  main: 2" in text.stdout
    assert f"  cron: {held['cron']['holder']} (held" in text.stdout


ANN = "ann00000000000000000000000"


def test_one_mattermost_bot_is_connected_by_one_replica_and_its_successor_reads_back(
    tmp_path: Path, postgres_url: str
) -> None:
    """The socket channels of the newer platforms run under the same lease as Telegram; the
    replica that takes the socket over reads back what was posted meanwhile, from the marks
    the previous holder left in the shared delivery position."""
    with ScriptedModelServer(echo) as model, ScriptedMattermost() as mm:
        mm.add_user(ANN, "ann")
        dm = mm.dm_channel(ANN)
        section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
        with replicas_on_postgres(
            tmp_path,
            model.base_url,
            postgres_url,
            channels={"mattermost": section},
            state={"postgres": {"leaseSeconds": 5}},
        ) as gateways:
            mm.wait_for(lambda: mm.connections, timeout=30)  # a post before that is not read
            mm.inject_post(dm, ANN, "one", channel_type="D")
            mm.wait_for(lambda: "echo one" in mm.texts(dm), timeout=30)
            holder, connected, _ = _holder_and_other(postgres_url, "channel:mattermost", gateways)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:  # an observation window, not a wait
                assert mm.connections == 1, "a second replica opened the bot's socket"
                time.sleep(0.05)

            _kill(connected)
            mm.inject_post(dm, ANN, "two", channel_type="D")  # before the lease runs out
            mm.wait_for(lambda: "echo two" in mm.texts(dm), timeout=40)
            assert _holder(postgres_url, "channel:mattermost") not in (None, holder)
            assert mm.connections == 2
    assert mm.texts(dm) == ["echo one", "echo two"]


def test_a_paused_poller_resumed_after_losing_its_lease_never_polls_beside_its_successor(
    tmp_path: Path, postgres_url: str
) -> None:
    with ScriptedModelServer(echo) as model, ScriptedBotAPI() as api:
        port = int(api.url.rsplit(":", 1)[1].split("/")[0])
        with _telegram_replicas(tmp_path, model.base_url, api, postgres_url, 4) as gateways:
            api.inject_text(chat_id=42, sender_id=42, text="one")
            api.wait_for(lambda: "echo one" in api.sent_texts(42), timeout=30)
            holder, paused, other = _holder_and_other(postgres_url, "channel:telegram", gateways)
            assert paused.proc is not None and other.proc is not None
            paused.proc.send_signal(signal.SIGSTOP)  # a frozen VM, a long GC pause
            try:
                wait_for(
                    lambda: _holder(postgres_url, "channel:telegram") not in (None, holder),
                    timeout=30,
                )
                api.inject_text(chat_id=42, sender_id=42, text="two")
                api.wait_for(lambda: "echo two" in api.sent_texts(42), timeout=30)
            finally:
                paused.proc.send_signal(signal.SIGCONT)
            polls = _pollers(api, gateways, port, seconds=4.0)
            assert set(polls) == {other.proc.pid}, polls
            api.inject_text(chat_id=42, sender_id=42, text="three")
            api.wait_for(lambda: "echo three" in api.sent_texts(42), timeout=30)
            assert paused.proc.poll() is None  # it lives on as a replica without the bot
        for text in ("one", "two", "three"):
            assert api.sent_texts(42).count(f"echo {text}") == 1
