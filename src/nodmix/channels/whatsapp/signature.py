"""Meta's webhook signature: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body,
keyed with the app secret>`. A request is refused unless it matches, before its body is
parsed or used; a header that cannot be a signature is refused before the body is read."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping

SIGNATURE_HEADER = "x-hub-signature-256"
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")


def presented_signature(headers: Mapping[str, str]) -> bytes | None:
    """The hex digest the request claims, or None when the header is missing or malformed."""
    value = headers.get(SIGNATURE_HEADER)
    if value is None or not _SIGNATURE.fullmatch(value.strip()):
        return None
    return value.strip()[len("sha256=") :].lower().encode("ascii")


def signature_matches(presented: bytes, body: bytes, app_secret: str) -> bool:
    """Whether `presented` is the body's signature (compared in constant time)."""
    expected = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(presented, expected.encode("ascii"))


def sign(body: bytes, app_secret: str) -> str:
    """The header value Meta would send with `body` (for the scripted server)."""
    digest = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"
