"""An operator's mistakes in `state.postgres.url`: a password never shows in errors, status or
logs whichever way the URL carries it, `${VAR}` works inside the URL too, and an unreachable
or invalid database is one line naming the config file and the key, within the timeout."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError
from nodmix.state.settings import redacted_url, state_settings
from tests.gateway.support import run_nodmix


def _config(url: str) -> NodmixConfig:
    document = {"state": {"backend": "postgres", "postgres": {"url": url}}}
    return msgspec.convert(document, NodmixConfig, strict=True)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://nodmix:s3cret@db:5432/nodmix", "postgresql://nodmix:***@db:5432/nodmix"),
        ("postgresql://nodmix:p@ss:w@db/nodmix", "postgresql://nodmix:***@db/nodmix"),
        (
            "postgresql://nodmix@db/nodmix?password=s3cret&sslmode=require",
            "postgresql://nodmix@db/nodmix?password=***&sslmode=require",
        ),
        ("host=db user=nodmix password=s3cret", "host=db user=nodmix password=***"),
        ("host=db password = 's3 cret' user=nodmix", "host=db password = *** user=nodmix"),
        ("postgresql://nodmix@db/nodmix", "postgresql://nodmix@db/nodmix"),
    ],
)
def test_the_password_is_hidden_wherever_the_url_carries_it(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_a_variable_inside_the_url_is_expanded() -> None:
    settings = state_settings(
        _config("postgresql://nodmix:${PGPASS}@${PGHOST}:5432/nodmix"),
        {"PGPASS": "pw", "PGHOST": "db"},
    )
    assert settings.url == "postgresql://nodmix:pw@db:5432/nodmix"


def test_an_unset_variable_inside_the_url_names_the_file_and_key() -> None:
    with pytest.raises(ConfigError) as raised:
        state_settings(
            _config("postgresql://nodmix:${PGPASS}@db/nodmix"), {}, file="/etc/nodmix.json"
        )
    assert str(raised.value) == (
        "/etc/nodmix.json: state.postgres.url: refers to ${PGPASS}, which is not set in the "
        "environment"
    )


@pytest.mark.parametrize("url", ["postgresql://n:${PW:-x}@db/n", "postgresql://n:${PW@db/n"])
def test_a_reference_form_that_is_not_expanded_is_refused_not_sent(url: str) -> None:
    with pytest.raises(ConfigError, match=r"is not a variable reference Nodmix expands"):
        state_settings(_config(url), {"PW": "pw"})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write(state: Path, url: str) -> Path:
    path = state / "nodmix.json"
    section = {"backend": "postgres", "postgres": {"url": url, "connectTimeoutSeconds": 2}}
    path.write_text(json.dumps({"state": section}), encoding="utf-8")
    return path


@pytest.mark.integration
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://nodmix:s3cret-pw@127.0.0.1:{port}/nodmix",
        "postgresql://nodmix@127.0.0.1:{port}/nodmix?password=s3cret-pw",
        "host=127.0.0.1 port={port} user=nodmix password=s3cret-pw",
    ],
)
def test_an_unreachable_database_is_one_line_naming_file_and_key(
    isolated_state: Path, url: str
) -> None:
    config = _write(isolated_state, url.format(port=_closed_port()))
    started = time.monotonic()
    result = run_nodmix(isolated_state, "state", "status")
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no traceback, no pool warnings
    assert lines[0].startswith("nodmix: error: cannot reach the state database ")
    assert f"(state.postgres.url in {config})" in lines[0]
    assert "Connection refused" in lines[0]
    assert "s3cret-pw" not in result.stderr + result.stdout


@pytest.mark.integration
def test_an_invalid_url_names_the_file_and_key(isolated_state: Path) -> None:
    config = _write(isolated_state, "postgres as usual")
    result = run_nodmix(isolated_state, "state", "status")
    assert result.returncode == 1
    assert result.stderr.startswith(f"nodmix: error: {config}: state.postgres.url: not a valid")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_a_password_in_the_query_stays_out_of_status_and_logs(
    isolated_state: Path, postgres_url: str
) -> None:
    # The test server trusts loopback logins, so any password is accepted and must be hidden.
    _write(isolated_state, f"{postgres_url}?password=s3cret-pw")
    shown = run_nodmix(isolated_state, "state", "status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["database"].endswith("?password=***")
    status = run_nodmix(isolated_state, "status")
    logs = "".join(p.read_text() for p in (isolated_state / "logs").glob("*") if p.is_file())
    assert "s3cret-pw" not in shown.stdout + status.stdout + status.stderr + logs


@pytest.mark.integration
def test_the_server_drops_a_silent_replica_and_its_locks_within_seconds(
    isolated_state: Path, postgres_url: str
) -> None:
    # A partitioned replica's advisory locks (a session's turn, a cron job's run) live as long
    # as its server process thinks it is there: two hours of silence by default.
    from nodmix.state.postgres.backend import PostgresState
    from tests.state.conftest import pg_settings

    url = f"{postgres_url}?options=-c%20work_mem%3D8MB"  # an operator's own options stay
    backend = PostgresState.open(pg_settings(url), isolated_state, role="test")
    try:

        def show(conn: Any) -> list[str]:
            names = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count")
            return [
                str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in (*names, "work_mem")
            ]

        assert backend.db.query(show) == ["5", "2", "3", "8MB"]
    finally:
        backend.close()
