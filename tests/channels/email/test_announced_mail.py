"""The email adapter against a real dovecot, with mail delivered at the worst moment: just
before the adapter's search. The server takes the mail in only at the end of that search, so
the search cannot return it and only announces it (`* N EXISTS`); the IDLE that follows does
not announce it again. The adapter must still hand the mail on at once, not at the end of
the IDLE period (600 s here, far beyond the test's deadline)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import aioimaplib
import anyio
import pytest

from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.email.adapter import EmailAdapter
from nodmix.channels.email.settings import EmailSettings
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage
from tests.channels.mail_daemons import PASSWORD, USER, Dovecot

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ANN = "ann@example.org"


@pytest.fixture
def imap() -> Iterator[Dovecot]:
    server = Dovecot()
    server.start()
    yield server
    server.close()


def _settings(port: int) -> EmailSettings:
    return EmailSettings(
        address=USER,
        imap_host="127.0.0.1",
        imap_port=port,
        imap_tls=False,
        imap_user=USER,
        imap_password=PASSWORD,
        mailbox="INBOX",
        smtp_host="127.0.0.1",
        smtp_port=25,
        smtp_security="none",
        smtp_user=None,
        smtp_password=None,
    )


def _mail(text: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = ANN, USER, "Ferry"
    mail["Message-ID"] = make_msgid(domain="example.org")
    mail.set_content(text)
    return mail


async def _until(check: Callable[[], object], what: str) -> None:
    """Poll `check` with a deadline far below the IDLE period."""
    with anyio.move_on_after(15):
        while not check():
            await anyio.sleep(0.02)
    assert check(), f"{what}: not within 15 s"


@pytest.mark.parametrize(
    "rebuilt",
    [True, False],
    ids=["after-a-uidvalidity-change-in-the-since-search", "in-the-first-uid-search"],
)
async def test_mail_delivered_just_before_a_search_is_handed_on_without_waiting_for_idle(
    tmp_path: Path, imap: Dovecot, monkeypatch: pytest.MonkeyPatch, rebuilt: bool
) -> None:
    log = open_delivery_log(tmp_path, "email")
    if rebuilt:  # saved under another UIDVALIDITY: the adapter searches SINCE the last check
        log.save_position({"uidValidity": 1, "lastUid": 9, "checkedAt": time.time()})
    searches: list[tuple[str, ...]] = []
    search = aioimaplib.IMAP4.uid_search

    async def deliver_then_search(self: aioimaplib.IMAP4, *criteria: str, **kw: Any) -> Any:
        searches.append(criteria)
        if len(searches) == 1:  # the mail lands after the last command, before this one
            await anyio.to_thread.run_sync(imap.deliver, _mail("second"))
        return await search(self, *criteria, **kw)

    monkeypatch.setattr(aioimaplib.IMAP4, "uid_search", deliver_then_search)
    got: list[InboundMessage] = []

    async def sink(message: InboundMessage) -> None:
        got.append(message)

    adapter = EmailAdapter(_settings(imap.port), tmp_path)
    status = ChannelStatus(channel="email")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(adapter.run, sink, status)
        await _until(lambda: got, "the mail delivered during the search")
        tasks.cancel_scope.cancel()
    assert searches[0][0] == ("SINCE" if rebuilt else "UID")
    assert [m.text for m in got] == ["Subject: Ferry\n\nsecond"]
