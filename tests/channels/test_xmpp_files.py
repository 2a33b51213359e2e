"""Files over XMPP against a real Prosody with its HTTP File Upload service
(mod_http_file_share): a person's slixmpp client uploads a file and shares its link as
clients do (XEP-0363 + XEP-0066); pictures reach the vision model, voice notes are
transcribed, the attachment cap holds, and a reply's file is uploaded and shared back (or
named in a note when the server has no upload service)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.prosody import BOT_PASSWORD, Prosody, XmppPerson, bot_server, xmpp_gateway
from tests.channels.support import model_user_texts
from tests.gateway.support import run_nodmix
from tests.media.samples import needs_ffmpeg, noise, photo, voice_note
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration

CAP = 400_000


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[Prosody]:
    server = bot_server(tmp_path / "prosody", upload=True)
    yield server
    server.stop()


def _config(state: Path, model: ScriptedModelServer, prosody: Prosody, **top: Any) -> None:
    section = {
        "jid": "nodbot@localhost",
        "password": BOT_PASSWORD,
        "server": "127.0.0.1",
        "port": prosody.port,
        "tls": "off",
        "typing": False,
        "allowFrom": ["ann@localhost"],
        "maxAttachmentBytes": CAP,
    }
    config = scripted_config(model.base_url, channels={"xmpp": section}, **top)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def test_a_shared_picture_reaches_the_vision_model_and_a_file_over_the_cap_is_refused(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody)
    ann = people["ann"] = XmppPerson(prosody, "ann")
    picture = photo(1200, 900)
    big = noise(800, 800)
    assert len(picture) < CAP < len(big)
    with xmpp_gateway():
        link = ann.send_file("nodbot@localhost", "garden.jpg", picture)
        ann.wait_for(lambda: ann.texts("nodbot@localhost"), what="the reply to the picture")
        ann.send_file("nodbot@localhost", "huge.png", big)
        ann.wait_for(lambda: len(ann.texts("nodbot@localhost")) >= 2, what="the refusal")
        texts = ann.texts("nodbot@localhost")
    assert link.startswith(f"http://127.0.0.1:{prosody.http_port}/")
    assert len(model.images()) == 1 and len(model.requests) == 1
    assert "garden.jpg" in json.dumps(model.requests[0].body)
    assert link not in json.dumps(model.requests[0].body), "the link is the file, not the text"
    assert texts[1].startswith("That photo is 1.8 MB, larger than the 390 KB")
    inbox = isolated_state / "workspace" / "inbox"
    assert [p.read_bytes() for p in inbox.iterdir()] == [picture]


def test_a_shared_voice_note_is_transcribed(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    needs_ffmpeg()
    _config(isolated_state, model, prosody, tools={"media": {"audio": {"provider": "local"}}})
    ann = people["ann"] = XmppPerson(prosody, "ann")
    note = voice_note()
    with xmpp_gateway():
        ann.send_file("nodbot@localhost", "voice-message.ogg", note)
        ann.wait_for(lambda: ann.texts("nodbot@localhost"), what="the reply to the voice note")
    heard = model_user_texts(model)[0]
    assert heard.startswith("[voice note inbox/") and heard.endswith("calendar tomorrow")
    assert model.audio_calls[0].file_data == note


def test_a_file_sent_to_a_person_is_uploaded_and_arrives_as_a_link(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody)
    ann = people["ann"] = XmppPerson(prosody, "ann")
    report = isolated_state / "report.pdf"
    report.write_bytes(b"%PDF-1.4 the quarterly figures")
    sent = run_nodmix(
        isolated_state,
        "message",
        "send",
        "--channel",
        "xmpp",
        "--to",
        ann.jid,
        "--file",
        str(report),
        "the report",
    )
    assert sent.returncode == 0, sent.stderr
    links = ann.wait_for(ann.links, what="the file's link")
    assert ann.texts("nodbot@localhost") == ["the report", links[0]]
    fetched = httpx2.get(links[0], timeout=30)
    assert fetched.status_code == 200 and fetched.content == report.read_bytes()
    assert links[0].endswith("/report.pdf")


def test_without_an_upload_service_the_reply_says_which_file_was_not_sent(
    isolated_state: Path, tmp_path: Path, model: ScriptedModelServer, people: Any
) -> None:
    prosody = bot_server(tmp_path / "prosody", upload=False)
    try:
        _config(isolated_state, model, prosody)
        ann = people["ann"] = XmppPerson(prosody, "ann")
        report = isolated_state / "report.pdf"
        report.write_bytes(b"%PDF-1.4 figures")
        sent = run_nodmix(
            isolated_state, "message", "send", "--channel", "xmpp", "--to", ann.jid,
            "--file", str(report), "the report",
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        texts = ann.wait_for(lambda: ann.texts("nodbot@localhost"), what="the note")
    finally:
        prosody.stop()
    assert texts == [
        "the report\n(file report.pdf not sent: the XMPP server offers no HTTP File Upload "
        "(XEP-0363))"
    ]
    assert ann.links() == []
