"""signal-cli's `receive` notification params, as its daemon emits them (for the scripted
daemon in `nodmix.testing.signal_daemon`)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any

SCOPED = frozenset(
    {"listContacts", "send", "sendTyping", "sendReceipt", "getAttachment", "listGroups"}
)
"""Methods that name the account in a multi-account daemon."""
PLACEHOLDER = "\ufffc"
"""Signal writes a mention into the text as this character; `mentions[]` says whom."""


def now_ms() -> int:
    """Signal's timestamps: milliseconds since the epoch."""
    return int(time.time() * 1000)


def envelope(
    *,
    account: str,
    sender_uuid: str,
    sender_number: str | None,
    name: str,
    timestamp: int,
    data: dict[str, Any] | None = None,
    **kinds: Any,
) -> dict[str, Any]:
    """A `receive` notification's params (`dataMessage`, or another kind such as
    `typingMessage` / `receiptMessage` given by keyword)."""
    env: dict[str, Any] = {
        "source": sender_number or sender_uuid,
        "sourceNumber": sender_number,
        "sourceUuid": sender_uuid,
        "sourceName": name,
        "sourceDevice": 1,
        "timestamp": timestamp,
        "serverReceivedTimestamp": timestamp + 3,
        "serverDeliveredTimestamp": timestamp + 5,
    }
    if data is not None:
        env["dataMessage"] = data
    env.update(kinds)
    return {"envelope": env, "account": account}


def data_message(
    text: str | None,
    *,
    timestamp: int,
    group_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    quote: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `dataMessage` (the body of an ordinary message)."""
    data: dict[str, Any] = {
        "timestamp": timestamp,
        "message": text,
        "expiresInSeconds": 0,
        "viewOnce": False,
    }
    if mentions:
        data["mentions"] = mentions
    if attachments:
        data["attachments"] = attachments
    if quote:
        data["quote"] = quote
    if group_id is not None:
        data["groupInfo"] = {
            "groupId": group_id,
            "groupName": "Team",
            "revision": 3,
            "type": "DELIVER",
        }
    return data


def mention_of(number: str, uuid: str, *, start: int = 0) -> dict[str, Any]:
    """A mention of the account at `start` (one placeholder character)."""
    return {"name": number, "number": number, "uuid": uuid, "start": start, "length": 1}


def attachment(
    attachment_id: str, content_type: str, size: int, name: str | None
) -> dict[str, Any]:
    """An attachment reference (the file is fetched with `getAttachment`)."""
    item: dict[str, Any] = {
        "contentType": content_type,
        "id": attachment_id,
        "size": size,
        "width": None,
        "height": None,
        "caption": None,
        "uploadTimestamp": now_ms(),
    }
    if name is not None:
        item["filename"] = name
    return item


def send_result(timestamp: int, recipients: list[tuple[str | None, str]]) -> dict[str, Any]:
    """`send`'s result: the timestamp and one SUCCESS per `(number, uuid)`."""
    return {
        "timestamp": timestamp,
        "results": [
            {"recipientAddress": {"uuid": uuid, "number": number}, "type": "SUCCESS"}
            for number, uuid in recipients
        ],
    }


@dataclass
class Sent:
    """One message the account sent (or edited)."""

    to: str
    """The recipient (an ACI or number) or the group id."""
    text: str
    attachments: list[tuple[str, str, bytes]] = field(default_factory=list)
    """`(mime type, file name, bytes)` of each attachment."""
    voice_note: bool = False
    edit_of: int | None = None
    timestamp: int = 0


def target(params: dict[str, Any]) -> str:
    """The recipient or group a call names."""
    if params.get("groupId"):
        return str(params["groupId"])
    recipient = params.get("recipient")
    if isinstance(recipient, list):
        return str(recipient[0]) if recipient else ""
    return str(recipient or "")


def decode_send(params: dict[str, Any], timestamp: int) -> Sent:
    """What a `send` call asked for (its data-URI attachments decoded)."""
    files = []
    for uri in params.get("attachments") or []:
        head, _, data = str(uri).partition(";base64,")
        mime, _, rest = head.removeprefix("data:").partition(";")
        name = rest.removeprefix("filename=") if rest.startswith("filename=") else ""
        files.append((mime, name, base64.b64decode(data)))
    edit = params.get("editTimestamp")
    return Sent(
        to=target(params),
        text=str(params.get("message") or ""),
        attachments=files,
        voice_note=bool(params.get("voiceNote")),
        edit_of=int(edit) if edit is not None else None,
        timestamp=timestamp,
    )


class RpcRefused(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)
