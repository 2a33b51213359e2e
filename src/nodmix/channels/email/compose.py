"""Outbound mail (stdlib `email`): a reply in the sender's thread, or a new message."""

from __future__ import annotations

import mimetypes
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from nodmix.channels.email.mapping import ThreadInfo
from nodmix.channels.types import OutboundMessage

DEFAULT_SUBJECT = "Message from your assistant"


def reply_subject(subject: str) -> str:
    """`Re: <subject>` (once)."""
    subject = subject.strip()
    if not subject:
        return "Re: your message"
    return subject if subject.lower().startswith("re:") else f"Re: {subject}"


def compose(message: OutboundMessage, *, sender: str, thread: ThreadInfo | None) -> EmailMessage:
    """The mail for `message`: threaded under `thread` when there is one."""
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = message.chat_id
    mail["Date"] = formatdate(localtime=False, usegmt=True)
    mail["Message-ID"] = make_msgid(domain=sender.rsplit("@", 1)[-1] or None)
    mail["Auto-Submitted"] = "auto-replied"  # other robots must not answer it
    if thread is not None:
        mail["Subject"] = reply_subject(thread.subject)
        mail["In-Reply-To"] = thread.message_id
        refs = [*thread.references[-20:], thread.message_id]
        mail["References"] = " ".join(dict.fromkeys(refs))
    else:
        mail["Subject"] = DEFAULT_SUBJECT
    mail.set_content(message.text or "")
    for attachment in message.attachments:
        if attachment.path is None:
            continue
        name = attachment.name or attachment.path.name
        kind, _ = mimetypes.guess_type(name)
        maintype, subtype = (kind or "application/octet-stream").split("/", 1)
        mail.add_attachment(
            attachment.path.read_bytes(), maintype=maintype, subtype=subtype, filename=name
        )
    return mail
