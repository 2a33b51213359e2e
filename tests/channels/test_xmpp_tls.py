"""XMPP over STARTTLS against a real Prosody with a self-signed certificate made for the test:
trusted through `channels.xmpp.caFile` the bot logs in encrypted and answers; a certificate
it does not trust is refused with one readable line (in the channel's status and in
`doctor`), and nothing is sent in plain text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.daemon import self_signed
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import Prosody, XmppPerson, bot_server, write_bot_config, xmpp_gateway
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration


@pytest.fixture
def certs(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path / "certs")


@pytest.fixture
def prosody(tmp_path: Path, certs: tuple[Path, Path]) -> Iterator[Prosody]:
    server = bot_server(tmp_path / "prosody", tls=certs)
    yield server
    server.stop()


def _config(state: Path, model: ScriptedModelServer, prosody: Prosody, **xmpp: Any) -> None:
    starttls = {"tls": "starttls", "allowFrom": ["ann@localhost"], **xmpp}
    write_bot_config(state, model.base_url, prosody, **starttls)


def test_a_server_certificate_trusted_through_ca_file_gives_an_encrypted_session(
    isolated_state: Path,
    prosody: Prosody,
    model: ScriptedModelServer,
    certs: tuple[Path, Path],
) -> None:
    _config(isolated_state, model, prosody, caFile=str(certs[0]))
    ann = XmppPerson(prosody, "ann", ca_file=certs[0])
    try:
        with xmpp_gateway() as gateway:
            client: Any = gateway.runtime.channels.adapter("xmpp")._client  # type: ignore[attr-defined]
            tls = client.transport.get_extra_info("ssl_object")
            assert tls is not None and tls.version().startswith("TLSv1.")
            ann.say("nodbot@localhost", "over TLS")
            ann.wait_for(lambda: ann.texts("nodbot@localhost"), what="the reply")
    finally:
        ann.close()
    assert ann.texts("nodbot@localhost") == ["over TLS"]
    assert model_user_texts(model) == ["over TLS"]
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel xmpp: connected as nodbot@localhost" in doctor.stdout


@pytest.mark.parametrize("trust", ["system CAs only", "another certificate"])
def test_a_certificate_the_bot_does_not_trust_is_refused_with_a_clear_error(
    isolated_state: Path, tmp_path: Path, prosody: Prosody, model: ScriptedModelServer, trust: str
) -> None:
    extra = {}
    if trust == "another certificate":
        extra["caFile"] = str(self_signed(tmp_path / "other", "other")[0])
    _config(isolated_state, model, prosody, **extra)
    with xmpp_gateway(connected=False) as gateway:
        status = gateway.runtime.channels.statuses["xmpp"]
        wait_until(lambda: status.last_error, what="the refusal")
        assert not status.connected
        error = status.last_error or ""
    assert error.startswith("certificate refused: the server's TLS certificate is not trusted")
    assert "channels.xmpp.caFile" in error
    doctor = run_nodmix(isolated_state, "doctor")
    assert "certificate is not trusted" in doctor.stdout
    assert "Traceback" not in doctor.stdout + doctor.stderr


def test_an_unreadable_ca_file_is_a_config_error_naming_the_key(
    isolated_state: Path, tmp_path: Path, model: ScriptedModelServer
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate", encoding="utf-8")
    section = {"jid": "nodbot@localhost", "password": "x", "caFile": str(junk)}
    config_path = write_config(isolated_state, model.base_url, {"xmpp": section})
    result = run_nodmix(isolated_state, "channels", "status")
    assert json.loads(config_path.read_text())["channels"]["xmpp"]["caFile"] == str(junk)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channels.xmpp.caFile" in doctor.stdout + doctor.stderr, (result.stdout, doctor.stdout)
    assert "Traceback" not in doctor.stdout + doctor.stderr
