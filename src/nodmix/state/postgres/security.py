"""The exec allowlist in PostgreSQL: one document; the version tells a replica (and its exec
gate's `refresh`) that another process changed it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.errors import ConfigError
from nodmix.security.allowlist import Allowlist
from nodmix.state.postgres import documents

if TYPE_CHECKING:
    from nodmix.state.postgres.database import Database

NAMESPACE = "security"
NAME = "exec-allowlist"


class PgAllowlist(Allowlist):
    """`Allowlist` on a document."""

    def __init__(self, db: Database, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.db = db
        self.path = Path("postgres/security/exec-allowlist")

    def _file_stamp(self) -> tuple[int, int] | None:
        found = documents.version(self.db, NAMESPACE, NAME)
        return None if found is None else (found, 0)

    def _raw(self) -> Any:
        found = documents.read(self.db, NAMESPACE, NAME)
        if found is None:
            return None
        try:
            return json.loads(found[0])
        except ValueError as exc:
            raise ConfigError(f"the exec allowlist in the database is not valid: {exc}") from None

    def _write(self, data: dict[str, Any]) -> None:
        documents.write(self.db, NAMESPACE, NAME, json.dumps(data).encode())
