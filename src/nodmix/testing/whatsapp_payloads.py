"""Webhook payloads shaped as the WhatsApp Cloud API sends them (for the scripted server)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

WABA_ID = "102290129340398"
_ids = itertools.count(1)


def message_id() -> str:
    """A fresh `wamid.` id."""
    return f"wamid.HBgLMTU1NTAxMDQyNDIVAgASGBQz{next(_ids):010d}"


def bsuid(wa_id: str) -> str:
    """A business-scoped user id for `wa_id` (as Meta includes next to the number)."""
    return f"US.{int(wa_id) * 7919 % 10**19}"


def inbound(
    *,
    phone_number_id: str,
    display_number: str,
    sender: str,
    name: str,
    message: dict[str, Any],
) -> dict[str, Any]:
    """One `messages` change carrying `message` from `sender` (a wa_id)."""
    message = {
        "from": sender,
        "id": message_id(),
        "timestamp": str(int(time.time())),
        **message,
    }
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": display_number, "phone_number_id": phone_number_id},
        "contacts": [{"profile": {"name": name}, "wa_id": sender, "user_id": bsuid(sender)}],
        "messages": [message],
    }
    return envelope(value)


def failed_status(
    *, phone_number_id: str, display_number: str, message_id: str, recipient: str, code: int
) -> dict[str, Any]:
    """A `failed` status for a message the business sent (131047: outside the window)."""
    titles = {131047: "Re-engagement message"}
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": display_number, "phone_number_id": phone_number_id},
        "statuses": [
            {
                "id": message_id,
                "status": "failed",
                "timestamp": str(int(time.time())),
                "recipient_id": recipient,
                "errors": [
                    {
                        "code": code,
                        "title": titles.get(code, "Message failed to send"),
                        "message": titles.get(code, "Message failed to send"),
                    }
                ],
            }
        ],
    }
    return envelope(value)


def envelope(value: dict[str, Any]) -> dict[str, Any]:
    """The outer `whatsapp_business_account` object around one change."""
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
    }


def text(
    body: str, *, group_id: str | None = None, reply_to: tuple[str, str] | None = None
) -> dict[str, Any]:
    """A text message (in a group; replying to `(message id, its sender)`)."""
    message: dict[str, Any] = {"type": "text", "text": {"body": body}}
    if group_id is not None:
        message["group_id"] = group_id
    if reply_to is not None:
        message["context"] = {"id": reply_to[0], "from": reply_to[1]}
    return message


def media(kind: str, media_id: str, mime_type: str, **extra: Any) -> dict[str, Any]:
    """An image, audio (`voice=True`: a voice note), document or video message."""
    body: dict[str, Any] = {"id": media_id, "mime_type": mime_type, "sha256": "0" * 64, **extra}
    return {"type": kind, kind: body}


@dataclass
class GraphCall:
    """One recorded Graph API request."""

    method: str
    path: str
    body: dict[str, Any]
    at: float = field(default_factory=time.time)
    answered: bool = False
    """Answered with success (not a scripted failure, a hang or a refused token)."""


@dataclass
class Delivery:
    """One POST of a queued update to the webhook."""

    index: int
    status: int
    """The HTTP status the webhook answered (0: no answer)."""


def graph_error(code: int, message: str) -> dict[str, Any]:
    """A Graph API error body."""
    return {
        "error": {
            "message": message,
            "type": "OAuthException",
            "code": code,
            "fbtrace_id": "AbCdEfGh",
        }
    }
