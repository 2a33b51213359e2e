"""Several real `nodmix gateway` processes sharing one PostgreSQL: their configs, turns sent
to them over HTTP, and what the database holds (tests and benchmarks)."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.manager import SessionManager
from nodmix.state.postgres.backend import PostgresState
from nodmix.state.settings import StateSettings
from tests.gateway.support import TOKEN, GatewayProcess
from tests.support.config import scripted_config


def replica_state(root: Path, name: str, model_url: str, db_url: str, **top: Any) -> Path:
    """A replica's own state dir with the deployment's config (`top` adds sections)."""
    state = root / name
    state.mkdir(parents=True, exist_ok=True)
    section = top.pop("state", {})
    postgres = {"url": db_url, "leaseSeconds": 2, **section.pop("postgres", {})}
    config = scripted_config(
        model_url,
        state={"backend": "postgres", "postgres": postgres, **section},
        gateway={"auth": {"token": TOKEN}},
        **top,
    )
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    return state


@contextlib.contextmanager
def replicas(states: list[Path]) -> Iterator[list[GatewayProcess]]:
    """Start a gateway per state dir (in order); kill what is left at the end."""
    started: list[GatewayProcess] = []
    try:
        for state in states:
            started.append(GatewayProcess(state).start())  # noqa: PERF401 (each one started in turn)
        yield started
    finally:
        for gateway in started:  # a clean stop: each replica gives its leases back
            if gateway.proc is not None and gateway.proc.poll() is None:
                with contextlib.suppress(Exception):
                    gateway.stop()
            gateway.__exit__(None, None, None)


@contextlib.contextmanager
def replicas_on_postgres(
    root: Path, model_url: str, db_url: str, *, count: int = 2, **top: Any
) -> Iterator[list[GatewayProcess]]:
    """`count` gateway replicas (`r1`, `r2`, ...) of one deployment on the database at
    `db_url`, each with its own state dir under `root` (`gateway.state`) and the same config
    (`top` as for `replica_state`), started in order and stopped at the end."""
    states = [
        replica_state(root, f"r{i}", model_url, db_url, **copy.deepcopy(top))
        for i in range(1, count + 1)
    ]
    with replicas(states) as started:
        yield started


def chat(gateway: GatewayProcess, text: str, session: str, *, timeout: float = 60) -> str:
    """One turn through `/v1/chat/completions` on `session`; the reply's text."""
    response = httpx2.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {TOKEN}", "x-nodmix-session-key": session},
        json={"model": "nodmix", "messages": [{"role": "user", "content": text}]},
        timeout=timeout,
    )
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


@contextlib.contextmanager
def database_view(db_url: str, state: Path) -> Iterator[SessionManager]:
    """A read-only session manager on the database (as a CLI next to the replicas)."""
    backend = PostgresState.open(StateSettings(backend="postgres", url=db_url), state, role="test")
    try:
        yield SessionManager(state, backend=backend.sessions(), read_only=True)
    finally:
        backend.close()


def conversation(manager: SessionManager, key: str) -> list[tuple[str, str]]:
    """`(role, text)` of the session's messages, and whether the chain is linear."""
    entries = manager.open(key, create=False).entries
    for i, entry in enumerate(entries):
        expected = entries[i - 1].id if i else None
        assert entry.parent_id == expected, f"entry {i} breaks the chain"
    return [(e.message.role, e.message.text) for e in entries if isinstance(e, MessageEntry)]
