"""Email through a real gateway: aioimaplib IDLE against a real dovecot, replies through
aiosmtplib to an aiosmtpd server, the agent's model behind a scripted model server. Nothing
from a sender who is not allowed reaches the model."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.mail_daemons import PASSWORD, USER, Dovecot, SmtpRecorder
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess, run_nodmix
from tests.media.samples import photo

pytestmark = pytest.mark.integration

ANN = "ann@example.org"


@pytest.fixture
def imap() -> Iterator[Dovecot]:
    server = Dovecot()
    server.start()
    yield server
    server.close()


@pytest.fixture
def smtp() -> Iterator[SmtpRecorder]:
    with SmtpRecorder() as server:
        yield server


def _config(
    state: Path, model: ScriptedModelServer, server: Dovecot, outbox: SmtpRecorder, **extra: Any
) -> None:
    section = {
        "address": USER,
        "imap": {"host": "127.0.0.1", "port": server.port, "tls": False, "password": PASSWORD},
        "smtp": {"host": "127.0.0.1", "port": outbox.port, "security": "none", "username": ""},
        **extra,
    }
    write_config(state, model.base_url, {"email": section})


def _mail(text: str, *, sender: str = ANN, subject: str = "Ferry", **headers: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = f"Ann Example <{sender}>"
    mail["To"] = USER
    mail["Subject"] = subject
    mail["Message-ID"] = make_msgid(domain="example.org")
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(text)
    return mail


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _connected(gateway: BackgroundGateway) -> None:
    wait_until(lambda: gateway.runtime.channels.statuses["email"].connected, what="connected")


def test_unknown_sender_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp)
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(_mail("secret plans"))
        texts = wait_until(lambda: smtp.texts(ANN), what="the pairing reply")
        assert "pairing code is" in texts[0]
        assert str(smtp.sent(ANN)[0]["Subject"]) == "Re: Ferry"  # in the sender's thread
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        approved = run_nodmix(isolated_state, "pairing", "approve", "email", code)
        assert approved.returncode == 0, approved.stderr
        imap.deliver(_mail("hello agent"))
        wait_until(lambda: len(smtp.texts(ANN)) >= 2, what="the answer")
    assert smtp.texts(ANN)[1] == "Subject: Ferry\n\nhello agent"
    assert model_user_texts(model) == ["Subject: Ferry\n\nhello agent"]


def test_replies_thread_under_the_message_and_robots_and_strangers_get_nothing(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp, dmPolicy="allowlist", allowFrom=["*@example.org"])
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(_mail("let me in", sender="mallory@evil.example"))
        imap.deliver(_mail("out of office", subject="Auto: away", Auto_Submitted="auto-replied"))
        first = _mail("when does it leave?")
        reply_to = str(first["Message-ID"])
        later = _mail(
            "and back?\n\nOn Mon, Ann wrote:\n> when does it leave?",
            subject="Re: Ferry",
            In_Reply_To=reply_to,
            References=reply_to,
        )
        imap.deliver(first)
        imap.deliver(later)
        wait_until(lambda: len(smtp.sent(ANN)) >= 2, what="two answers")
        status = gateway.runtime.channels.statuses["email"]
        assert status.refused == 1 and status.ignored == 1
    one, two = smtp.sent(ANN)
    assert str(one["Subject"]) == "Re: Ferry" and str(one["In-Reply-To"]) == reply_to
    assert str(two["Subject"]) == "Re: Ferry"
    assert str(two["In-Reply-To"]) == str(later["Message-ID"])
    assert str(two["References"]).split() == [reply_to, str(later["Message-ID"])]
    assert smtp.sent("mallory@evil.example") == []
    assert model_user_texts(model) == ["Subject: Ferry\n\nwhen does it leave?", "and back?"]


def test_attachments_arrive_in_the_workspace_and_go_out_with_a_reply(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        if len(request.messages) <= 2:
            return ModelReply.tool_call(
                "message",
                {"channel": "email", "to": ANN, "text": "the plan", "attachments": ["plan.txt"]},
            )
        return ModelReply.text("sent")

    model.respond = respond
    (isolated_state / "workspace").mkdir(exist_ok=True)
    (isolated_state / "workspace" / "plan.txt").write_text("ferry at 9:40", encoding="utf-8")
    _config(isolated_state, model, imap, smtp, allowFrom=[ANN])
    mail = _mail("see attached")
    png = photo(300, 200, "PNG")
    mail.add_attachment(png, maintype="image", subtype="png", filename="map.png")
    mail.add_attachment(b"9:40 ferry", maintype="text", subtype="plain", filename="times.txt")
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(mail)
        wait_until(lambda: len(smtp.sent(ANN)) >= 2, what="the file and the answer")
    prompt = model_user_texts(model)[0]
    assert prompt.startswith("Subject: Ferry\n\nsee attached\n[document attached: inbox/")
    assert prompt.endswith("-map.png: this model cannot see images]")
    inbox = isolated_state / "workspace" / "inbox"
    assert sorted(p.read_bytes() for p in inbox.iterdir()) == sorted([png, b"9:40 ferry"])
    sent = smtp.sent(ANN)[0]
    files = list(sent.iter_attachments())
    assert [f.get_filename() for f in files] == ["plan.txt"]
    assert files[0].get_content() == "ferry at 9:40"


def test_a_very_long_reply_arrives_as_several_mails_in_the_thread(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    long = " ".join(f"w{i:05d}" for i in range(18_000))
    model.respond = lambda request: ModelReply.text(long)
    _config(isolated_state, model, imap, smtp, allowFrom=[ANN])
    with _gateway() as gateway:
        _connected(gateway)
        mail = _mail("write a lot")
        imap.deliver(mail)
        wait_until(lambda: len(smtp.sent(ANN)) >= 3, what="three mails")
    texts = smtp.texts(ANN)
    assert all(len(t) <= 50_000 for t in texts)
    assert " ".join(texts).split() == long.split()
    assert {str(m["In-Reply-To"]) for m in smtp.sent(ANN)} == {str(mail["Message-ID"])}


def test_sigkill_mid_turn_then_restart_answers_once_and_fetches_nothing_twice(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model:
        _config(isolated_state, model, imap, smtp, allowFrom=[ANN])
        imap.deliver(_mail("old mail from before the channel existed"))
        with GatewayProcess(isolated_state) as gateway:
            wait_until(
                lambda: (isolated_state / "channels/email/position.json").exists(),
                what="the first position",
            )
            imap.deliver(_mail("are you there?"))
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert smtp.sent() == []

        with GatewayProcess(isolated_state):
            wait_until(lambda: smtp.sent(ANN), what="the answer after the restart")
            imap.deliver(_mail("second question"))
            wait_until(lambda: len(smtp.sent(ANN)) >= 2, what="the second answer")
        assert smtp.texts(ANN) == ["the answer", "the answer"]
        assert model_user_texts(model) == [
            "Subject: Ferry\n\nare you there?",
            "Subject: Ferry\n\nare you there?",
            "Subject: Ferry\n\nsecond question",
        ]


def test_doctor_logs_in_to_the_mailbox_and_names_the_key_on_a_wrong_password(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp)
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel email: connected as {USER} on 127.0.0.1" in doctor.stdout
    _config(
        isolated_state,
        model,
        imap,
        smtp,
        imap={"host": "127.0.0.1", "port": imap.port, "tls": False, "password": "wrong"},
    )
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel email" in doctor.stdout and "login refused" in doctor.stdout
    assert "check channels.email.imap and .smtp" in doctor.stdout
    _config(
        isolated_state,
        model,
        imap,
        smtp,
        smtp={"host": "127.0.0.1", "port": imap.port, "security": "none", "username": ""},
    )
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel email" in doctor.stdout and "smtp 127.0.0.1" in doctor.stdout


def test_after_the_imap_server_restarts_mail_is_fetched_again(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp, allowFrom=[ANN])
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses["email"]
        _connected(gateway)
        imap.stop()
        wait_until(lambda: not status.connected, what="the disconnect noticed")
        imap.start()
        imap.deliver(_mail("still there?"))
        wait_until(lambda: smtp.sent(ANN), timeout=30, what="the answer after the reconnect")
    assert smtp.texts(ANN) == ["Subject: Ferry\n\nstill there?"]


def test_a_rebuilt_mailbox_with_new_uidvalidity_is_not_answered_twice(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp, allowFrom=[ANN])
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(_mail("first"))
        wait_until(lambda: smtp.sent(ANN), what="the first answer")
    position = isolated_state / "channels/email/position.json"
    before = json.loads(position.read_text(encoding="utf-8"))["uidValidity"]
    imap.stop()
    imap.rebuild_uids()
    imap.start()
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(_mail("second"))
        wait_until(lambda: len(smtp.sent(ANN)) >= 2, what="the second answer")
    assert json.loads(position.read_text(encoding="utf-8"))["uidValidity"] != before
    assert smtp.texts(ANN) == ["Subject: Ferry\n\nfirst", "Subject: Ferry\n\nsecond"]


def test_message_send_from_the_shell_mails_an_allowed_address_only(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp, allowFrom=["*@example.org"])
    sent = run_nodmix(
        isolated_state, "message", "send", "--channel", "email", "--to", ANN, "ferry at 9:40"
    )
    assert sent.returncode == 0, sent.stderr
    assert smtp.texts(ANN) == ["ferry at 9:40"]
    assert str(smtp.sent(ANN)[0]["Subject"]) == "Message from your assistant"
    refused = run_nodmix(
        isolated_state, "message", "send", "--channel", "email", "--to", "x@evil.example", "hi"
    )
    assert refused.returncode != 0 and "not allowed" in refused.stderr
    assert len(smtp.sent()) == 1


def test_a_mail_too_large_to_read_reaches_the_agent_as_its_headers_and_a_note(
    isolated_state: Path, imap: Dovecot, smtp: SmtpRecorder, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, imap, smtp, allowFrom=[ANN], maxAttachmentBytes=1000)
    big = _mail("see the scan")
    big.add_attachment(bytes(range(256)) * 400, maintype="image", subtype="png", filename="s.png")
    small = _mail("and a small one")
    small.add_attachment(b"tiny", maintype="text", subtype="plain", filename="t.txt")
    with _gateway() as gateway:
        _connected(gateway)
        imap.deliver(big)
        imap.deliver(small)
        wait_until(lambda: len(smtp.sent(ANN)) >= 2, what="two answers")
    first, second = model_user_texts(model)
    assert first.startswith("Subject: Ferry\n\n[a mail of ")
    assert first.endswith("bytes, too large to read: only its headers]")
    assert second.startswith("Subject: Ferry\n\nand a small one\n[document attached: inbox/")
