"""The gateway's own token as a database document, so every replica accepts the same one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodmix.gateway.token import new_token, usable
from nodmix.state.postgres import documents

if TYPE_CHECKING:
    from nodmix.state.postgres.database import Database

NAMESPACE = "gateway"
NAME = "token"


class PgTokenStore:
    """`TokenStore` in the document `gateway/token` (made once, by whichever replica starts
    first: the document's row lock makes replicas starting together agree)."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    where = "the state database"

    def __init__(self, db: Database) -> None:
        self.db = db

    def load(self) -> str | None:
        """The stored token, or None."""
        found = documents.read(self.db, NAMESPACE, NAME)
        return _token(found[0] if found else None)

    def load_or_create(self, token: str | None = None) -> str:
        """The stored token, made now (or `token`, when given) if there is none or it is
        unusable."""

        def change(current: bytes | None) -> tuple[bytes | None, str]:
            kept = _token(current)
            if kept is not None:
                return None, kept
            made = token if token is not None and usable(token) else new_token()
            return made.encode("ascii"), made

        result: str = documents.update(self.db, NAMESPACE, NAME, change)
        return result


def _token(raw: bytes | None) -> str | None:
    if not raw:
        return None
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return token if usable(token) else None
