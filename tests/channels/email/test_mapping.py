"""Inbound mail: who sent it, what the agent reads, and which mail is never answered."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from nodmix.channels.email.compose import compose, reply_subject
from nodmix.channels.email.mapping import body_text, parse, spool_attachments, thread_info
from nodmix.channels.types import OutboundMessage

OWN = "agent@nodmix.test"


def _mail(body: str = "hi", **headers: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = headers.pop("From", "Ann <Ann@Example.org>")
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body)
    return parse(mail.as_bytes())


def test_the_quoted_history_is_left_out_of_the_text() -> None:
    body = "Yes, 9:40.\n\nOn Tue, 24 Nov 2026, Ann wrote:\n> When?\n> \n"
    assert body_text(_mail(body)) == "Yes, 9:40."
    assert body_text(_mail("> only a quote")) == "> only a quote"


def test_html_only_mail_becomes_text() -> None:
    mail = EmailMessage()
    mail["From"] = "ann@example.org"
    mail.set_content("<p>Hello&amp;welcome</p><script>x()</script><div>bye</div>", subtype="html")
    assert body_text(parse(mail.as_bytes())) == "Hello&welcome\nbye"


def test_attachments_over_the_limit_are_not_saved_and_carry_their_size(tmp_path: Path) -> None:
    mail = _mail()
    mail.add_attachment(b"small", maintype="text", subtype="plain", filename="a.txt")
    mail.add_attachment(b"x" * 100, maintype="application", subtype="pdf", filename="big.pdf")
    spool = tmp_path / "spool"
    files, notes = spool_attachments(parse(mail.as_bytes()), spool, "<id@x>", 50)
    assert [(f.kind, f.name, f.size) for f in files] == [
        ("document", "a.txt", 5),
        ("document", "big.pdf", 100),
    ]
    assert Path(str(files[0].ref)).read_bytes() == b"small"
    assert files[1].ref is None, "the large one is refused by the channel layer, unsaved"
    assert [p.name for p in spool.iterdir()] == [Path(str(files[0].ref)).name]
    assert notes == []


def test_a_reply_carries_the_thread_and_one_re() -> None:
    mail = _mail(Subject="Re: Ferry", Message_ID="<b@x>", In_Reply_To="<a@x>", References="<a@x>")
    info = thread_info(mail, "<b@x>")
    out = compose(OutboundMessage(chat_id="ann@example.org", text="ok"), sender=OWN, thread=info)
    assert str(out["Subject"]) == "Re: Ferry"
    assert str(out["In-Reply-To"]) == "<b@x>"
    assert str(out["References"]) == "<a@x> <b@x>"
    assert str(out["Auto-Submitted"]) == "auto-replied"
    assert reply_subject("") == "Re: your message"
