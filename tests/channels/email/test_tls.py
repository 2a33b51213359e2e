"""The email adapter reads mail over IMAP with TLS from a real dovecot (a certificate for
127.0.0.1 from a test CA the system's default trust is pointed at)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import anyio
import pytest

from nodmix.channels.email.adapter import EmailAdapter
from nodmix.channels.email.settings import EmailSettings
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage
from tests.channels.mail_daemons import PASSWORD, USER, Dovecot

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def imaps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dovecot]:
    server = Dovecot(tls=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(server.ca_file))  # read by the default context
    server.start()
    yield server
    server.close()


async def _until(check: Callable[[], object], what: str) -> None:
    with anyio.move_on_after(15):
        while not check():
            await anyio.sleep(0.02)
    assert check(), f"{what}: not within 15 s"


async def test_mail_arriving_over_imap_with_tls_is_handed_on(
    tmp_path: Path, imaps: Dovecot
) -> None:
    settings = EmailSettings(
        address=USER,
        imap_host="127.0.0.1",
        imap_port=imaps.tls_port,
        imap_tls=True,
        imap_user=USER,
        imap_password=PASSWORD,
        mailbox="INBOX",
        smtp_host="127.0.0.1",
        smtp_port=25,
        smtp_security="none",
        smtp_user=None,
        smtp_password=None,
    )
    got: list[InboundMessage] = []

    async def sink(message: InboundMessage) -> None:
        got.append(message)

    status = ChannelStatus(channel="email")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(EmailAdapter(settings, tmp_path).run, sink, status)
        await _until(lambda: status.connected, "connected over TLS")
        mail = EmailMessage()
        mail["From"], mail["To"], mail["Subject"] = "ann@example.org", USER, "Ferry"
        mail["Message-ID"] = make_msgid(domain="example.org")
        mail.set_content("over tls")
        await anyio.to_thread.run_sync(imaps.deliver, mail)
        await _until(lambda: got, "the mail")
        tasks.cancel_scope.cancel()
    assert [m.text for m in got] == ["Subject: Ferry\n\nover tls"]
